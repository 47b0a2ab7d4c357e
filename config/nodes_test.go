package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// builtNodes is how many nodes yaml.v3 builds for the documents of data
// that decodeRoot reads (the first two), as far as they parse.
func builtNodes(data []byte) int {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	total := 0
	for range 2 {
		var doc yaml.Node
		if dec.Decode(&doc) != nil {
			break
		}
		var walk func(*yaml.Node)
		walk = func(n *yaml.Node) {
			total++
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(&doc)
	}
	return total
}

// countShapes are documents whose nodes countNodes counts most tightly, or
// that would be undercounted by a scan that trusted quotes, comments or
// block scalars.
var countShapes = []string{
	":\n:\n:\n", "? \n? \n", "- :\n- :\n", ":\n  :\n    :\n", "[:, :, :]", "[?, ?]", "{a, b, c}", "{:, :}",
	"[a: b, c: d]", "{? a}", "- - - a: 1\n", "a:\n- 1\n- 2\n", "a: &x\n  b: 1\nc: *x\n", "a: !!map\n  b: 1\n",
	"[&a:b, *a:c]", "{\"a\":1,\"b\":[1,2],\"c\":{}}", "a: 1\r- 2\r", "a: 1\u2028b: 2\u2028", "a: [1,\u00852]",
	"x: \"a\n  ', 1, 1, 1]\ny: [\n  ', 1, 1]\n", "b: |\n  \"\nextra: [1,1,1,1]\nx: \"\n",
	"a: [x \"y, 1, 1, 1]\n", "a: \"q #\", b: [1,1,1] # c\n", "# ' \n- 1\n- 1\n", "---\n---\n", "--- :\n--- :\n",
	"[\"a\n  b\":c, d]", "{a\n b: c}", "- [a]: b\n", "a: 1 # c\n  # c\nb: [ # c\n 1, # c\n 2]\n",
	"\ufeff- 1\n\ufeff- 2\n", "k: 'it''s: [1,1]'\nl: [1, 1]\n", "- !t\n- &a\n- !t &b\n",
}

// TestCountNodesIsAnUpperBound: for every fixture and the shapes above,
// countNodes counts at least the nodes yaml.v3 builds.
func TestCountNodesIsAnUpperBound(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yaml")
	more, _ := filepath.Glob("testdata/*/*.yaml")
	docs := map[string][]byte{}
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = data
	}
	for i, s := range countShapes {
		docs["shape "+strings.Repeat("#", i)] = []byte(s)
		docs["shape x100 "+strings.Repeat("#", i)] = []byte(strings.Repeat(s, 100))
	}
	for name, data := range docs {
		built := builtNodes(data)
		if n, _ := countNodes(data, 1<<40); n < built {
			t.Errorf("%s: counted %d nodes, yaml.v3 builds %d:\n%q", name, n, built, data)
		}
	}
}

// FuzzCountNodes: whatever the bytes, yaml.v3 builds no more nodes than
// countNodes counts.
//
//	go test -run XXX -fuzz FuzzCountNodes ./config/
func FuzzCountNodes(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil && len(data) < 16<<10 {
			f.Add(data)
		}
	}
	for _, s := range countShapes {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		built := builtNodes(data)
		if n, _ := countNodes(data, 1<<40); n < built {
			t.Fatalf("counted %d nodes, yaml.v3 builds %d", n, built)
		}
	})
}
