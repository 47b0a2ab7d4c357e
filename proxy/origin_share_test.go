package proxy_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"sluice/config"
)

// TestOriginStatisticsShareTheRoutes: the limiter's per-origin statistics
// share one budget (100,000 origins) among the resources the routes name,
// so a client sending a made-up X-Origin with every request holds, over
// 1,000 routes, 100 statistics nodes a route, not 10,000 (about 630 bytes
// each: 6 GB over 1,000 routes).
func TestOriginStatisticsShareTheRoutes(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(up.Close)
	var b strings.Builder
	fmt.Fprintf(&b, "origin:\n  from: header:X-Origin\nupstreams:\n  up:\n    targets: [%q]\nroutes:\n", up.URL)
	for i := range 1000 {
		fmt.Fprintf(&b, "  - { path: /r%d, upstream: up, resource: r%d }\n", i, i)
	}
	srv, g := rulesGatewayOf(t, b.String())
	for i := range 150 {
		req, _ := http.NewRequest("GET", srv.URL+"/r0", nil)
		req.Header.Set("X-Origin", fmt.Sprint("made-up-", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, rs := range g.Current().Flow.Stats(g.Now()) {
		if rs.Resource == "r0" {
			if len(rs.Origins) != 100 || rs.Node.PassQps == 0 {
				t.Fatalf("r0 tracks %d origins (%v passes a second), want its share of 100", len(rs.Origins), rs.Node.PassQps)
			}
			return
		}
	}
	t.Fatal("no statistics for r0")
}

// An origin read from an API key is masked on the admin API for readers
// who could not write, as long as origin.from names a credential. A
// reload that reads origins from ip instead does not list the keys seen
// before it, as if they were addresses, unmasked.
func TestOriginsOfAnotherSourceAreNotCarried(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(up.Close)
	rules := func(from string) string {
		return fmt.Sprintf("origin: { from: %q }\nupstreams: { up: { targets: [%q] } }\nroutes: [{ path: /r, upstream: up, resource: r }]\n", from, up.URL)
	}
	srv, g := rulesGatewayOf(t, rules("header:X-Api-Key"))
	req, _ := http.NewRequest("GET", srv.URL+"/r", nil)
	req.Header.Set("X-Api-Key", "sk-live-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	origins := func() (names []string) {
		for _, rs := range g.Current().Flow.Stats(g.Now()) {
			if rs.Resource == "r" {
				for _, o := range rs.Origins {
					names = append(names, o.Name)
				}
			}
		}
		return names
	}
	if got := origins(); len(got) != 1 || got[0] != "sk-live-secret" {
		t.Fatalf("origins %v, want the key", got)
	}
	cfg, err := config.Parse("rules.yaml", []byte(rules("ip")))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	if got := origins(); len(got) != 0 {
		t.Fatalf("after origin.from became ip, origins %v are listed, want none", got)
	}
}
