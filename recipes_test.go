package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// recipeBlock is a fenced yaml block of docs/recipes.md with the heading
// it sits under.
var recipeBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// recipes returns docs/recipes.md's yaml blocks by the "## " heading above
// them.
func recipes(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("docs/recipes.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	heading := ""
	text := string(b)
	for _, loc := range recipeBlock.FindAllStringSubmatchIndex(text, -1) {
		before := text[:loc[0]]
		if i := strings.LastIndex(before, "\n## "); i >= 0 {
			heading, _, _ = strings.Cut(before[i+4:], "\n")
		}
		if _, dup := out[heading]; dup {
			t.Fatalf("docs/recipes.md: two yaml blocks under %q", heading)
		}
		out[heading] = text[loc[2]:loc[3]]
	}
	return out
}

// TestRecipes: every rules.yaml snippet of docs/recipes.md validates, and
// the maintenance redirect sends browsers to the status page once the
// service answers 503, while API clients get the JSON 503.
func TestRecipes(t *testing.T) {
	all := recipes(t)
	if len(all) == 0 {
		t.Fatal("docs/recipes.md has no yaml blocks")
	}
	for name, doc := range all {
		if _, err := config.Parse("recipes.md ("+name+")", []byte(doc)); err != nil {
			t.Errorf("recipe %q does not validate:\n%v", name, err)
		}
	}

	doc, ok := all["Maintenance redirect"]
	if !ok {
		t.Fatal(`docs/recipes.md has no "Maintenance redirect" recipe`)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	cfg, err := config.Parse("maintenance.yaml", []byte(strings.ReplaceAll(doc, "http://127.0.0.1:9001", down.URL)))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, c := range []struct{ path, status, location, body string }{
		{"/shop/cart", "302", "https://status.example.com/maintenance", ""},
		{"/api/shop/cart", "503", "", `{"error":"down for maintenance","resource":"shop-api"}`},
	} {
		var w *httptest.ResponseRecorder
		// Five 503s from the service open the breaker; the sixth call is blocked.
		for range 6 {
			w = httptest.NewRecorder()
			g.ServeHTTP(w, httptest.NewRequest("GET", c.path, nil))
		}
		got := fmt.Sprintf("%d %s %s %s", w.Code, w.Header().Get("Location"), w.Header().Get("X-Sluice-Blocked"), w.Body.String())
		if want := fmt.Sprintf("%s %s degrade %s", c.status, c.location, c.body); got != want {
			t.Errorf("GET %s with the service down: %q, want %q", c.path, got, want)
		}
	}
}
