package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestLayers: no package imports one of its own or a higher layer of
// docs/architecture.md's table (layer 0's packages may import each other),
// and every package is in a layer. Only non-test imports count.
func TestLayers(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	layer := map[string]int{}
	row := regexp.MustCompile("^\\| (\\d+) \\| (.*?) \\|")
	pkg := regexp.MustCompile("`([^`]+)`")
	for _, l := range strings.Split(string(doc), "\n") {
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		for _, p := range pkg.FindAllStringSubmatch(m[2], -1) {
			path := "sluice/" + p[1]
			if p[1] == "sluice" {
				path = "sluice"
			}
			if _, dup := layer[path]; dup {
				t.Errorf("docs/architecture.md puts %s in two layers", path)
			}
			layer[path] = n
		}
	}
	if len(layer) < 10 {
		t.Fatalf("read only %d packages from docs/architecture.md's layers table", len(layer))
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		from, imports := f[0], f[1:]
		lf, ok := layer[from]
		if !ok {
			t.Errorf("%s is in no layer: add it to docs/architecture.md's table", from)
			continue
		}
		for _, to := range imports {
			if to != "sluice" && !strings.HasPrefix(to, "sluice/") {
				continue
			}
			lt, ok := layer[to]
			switch {
			case !ok:
				// reported as a package of its own
			case lt > lf || (lt == lf && lf != 0):
				t.Errorf("%s (layer %d) imports %s (layer %d): a package imports only lower layers (docs/architecture.md)", from, lf, to, lt)
			}
		}
	}
}
