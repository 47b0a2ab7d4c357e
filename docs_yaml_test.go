package main

import (
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestDocsYAMLParses: every yaml block of the README and docs/ is YAML a
// user can paste. Most are fragments (a route without its upstream), so
// they are parsed, not validated; the recipes are validated whole
// (TestRecipes). An audit found the chain strategy's example, with an
// unquoted {id} inside a flow mapping, refused by every YAML parser.
func TestDocsYAMLParses(t *testing.T) {
	blocks := 0
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var block []string
		start, in := 0, false
		for i, l := range strings.Split(string(text), "\n") {
			trimmed := strings.TrimSpace(l)
			switch {
			case !in && (trimmed == "```yaml" || trimmed == "```yml"):
				in, start, block = true, i+1, block[:0]
			case in && trimmed == "```":
				in = false
				blocks++
				var n yaml.Node
				if err := yaml.Unmarshal([]byte(strings.Join(block, "\n")), &n); err != nil {
					t.Errorf("%s:%d: the yaml block does not parse: %v", file, start, err)
				}
			case in:
				block = append(block, l)
			}
		}
	}
	if blocks < 20 {
		t.Fatalf("found %d yaml blocks in the docs, want the many they hold", blocks)
	}
}
