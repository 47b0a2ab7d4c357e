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
	layer := readLayers(t)
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

// TestNoHTTPBelowTheEdge: config, the mechanisms and the guards (layers 0 to
// 4) know nothing of HTTP (SPEC §1), not even through a library: none of
// them reaches net/http, x/net's HTTP packages or fasthttp, directly or
// transitively. upstream is the one exception: its health checks are HTTP
// requests. TestLayers sees only the module's own imports, so it cannot
// tell.
func TestNoHTTPBelowTheEdge(t *testing.T) {
	layer := readLayers(t)
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		from, deps := f[0], f[1:]
		if l, ok := layer[from]; !ok || l > 4 || from == "sluice/upstream" {
			continue
		}
		checked++
		for _, d := range deps {
			if isHTTP(d) {
				t.Errorf("%s (layer %d) reaches %s: below proxy and admin, packages know nothing of HTTP (SPEC §1)", from, layer[from], d)
				break
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d packages of layers 0 to 4", checked)
	}
}

func isHTTP(pkg string) bool {
	pkg = strings.TrimPrefix(pkg, "vendor/")
	return pkg == "net/http" || strings.HasPrefix(pkg, "net/http/") ||
		strings.HasPrefix(pkg, "golang.org/x/net/http") ||
		strings.HasPrefix(pkg, "github.com/valyala/fasthttp")
}

// readLayers reads docs/architecture.md's table: import path -> layer.
func readLayers(t *testing.T) map[string]int {
	t.Helper()
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
	return layer
}
