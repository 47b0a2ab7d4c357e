package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// TestHostRouting pins which route a request reaches by its Host
// (docs/edge.md, "Virtual hosts"): routes whose hosts match come before
// routes without hosts, the file's order holds among each, a wildcard
// stands for one or more labels, and the Host is compared without its
// port, case or trailing dot.
func TestHostRouting(t *testing.T) {
	ups := map[string]string{}
	for _, name := range []string{"wild", "shop", "deep", "plain", "only"} {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }))
		t.Cleanup(s.Close)
		ups[name] = s.URL
	}
	rules := fmt.Sprintf(`
upstreams:
  wild:  {targets: [%q]}
  shop:  {targets: [%q]}
  deep:  {targets: [%q]}
  plain: {targets: [%q]}
  only:  {targets: [%q]}
routes:
  - path: /api/*
    hosts: ["*.example.com"]
    upstream: wild
  - path: /api/*
    hosts: [shop.example.com]
    upstream: shop
  - path: /shop/*
    hosts: [shop.example.com, "*.shop.test"]
    upstream: shop
  - path: /api/*
    hosts: ["*.deep.example.com"]
    upstream: deep
  - path: /deep
    hosts: ["*.deep.example.com"]
    upstream: deep
  - path: /api/*
    upstream: plain
  - path: /shop/*
    upstream: plain
  - path: /only
    hosts: [Only.Test.]
    methods: [GET]
    upstream: only
`, ups["wild"], ups["shop"], ups["deep"], ups["plain"], ups["only"])
	cfg, err := config.Parse("hosts.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, host, method, path string
		want                     string // upstream name, or the status
	}{
		{"precedence: host routes in file order, the wildcard listed first", "shop.example.com", "GET", "/api/x", "wild"},
		{"precedence: a host route before a route without hosts", "shop.example.com", "GET", "/shop/x", "shop"},
		{"precedence: other hosts get the routes without hosts", "nohost.test", "GET", "/shop/x", "plain"},
		{"no Host at all: no host a limit could key on (400)", "", "GET", "/api/x", "400"},
		{"only a port: no host either", ":80", "GET", "/api/x", "400"},
		{"precedence: a narrower wildcard listed later", "x.deep.example.com", "GET", "/api/x", "wild"},
		{"precedence: the narrower wildcard's own path", "x.deep.example.com", "GET", "/deep", "deep"},
		{"precedence: a host whose routes lack the path falls back", "x.example.com", "GET", "/shop/y", "plain"},
		{"wildcard: one label", "api.example.com", "GET", "/api/x", "wild"},
		{"wildcard: several labels", "a.b.c.example.com", "GET", "/api/x", "wild"},
		{"wildcard: several labels, narrower wildcard", "a.b.deep.example.com", "GET", "/deep", "deep"},
		{"wildcard: not the bare suffix", "example.com", "GET", "/api/x", "plain"},
		{"wildcard: not the bare suffix, nothing else", "deep.example.com", "GET", "/deep", "404"},
		{"wildcard: a label boundary, not a string suffix", "evilexample.com", "GET", "/api/x", "plain"},
		// An empty label names no host: no route could take it, so the
		// catch-all routes did, stepping around a wildcard's limits.
		{"wildcard: an empty label is refused", ".example.com", "GET", "/api/x", "400"},
		{"wildcard: an empty label among labels is refused", "a..example.com", "GET", "/api/x", "400"},
		{"wildcard: an empty label before a narrower wildcard is refused", "a..deep.example.com", "GET", "/deep", "400"},
		{"wildcard: second host of a route", "www.shop.test", "GET", "/shop/x", "shop"},
		{"wildcard: its bare suffix is not listed", "shop.test", "GET", "/shop/x", "plain"},
		{"case: upper-case Host", "SHOP.EXAMPLE.COM", "GET", "/shop/x", "shop"},
		{"case: mixed-case Host under a wildcard", "Www.Shop.Test", "GET", "/shop/x", "shop"},
		{"case: mixed case in the file", "only.test", "GET", "/only", "only"},
		{"port: ignored", "shop.example.com:8443", "GET", "/shop/x", "shop"},
		{"port: ignored under a wildcard", "api.example.com:80", "GET", "/api/x", "wild"},
		{"port: an IPv6 literal", "[::1]:8080", "GET", "/shop/x", "plain"},
		{"trailing dot: dropped", "shop.example.com.", "GET", "/shop/x", "shop"},
		{"trailing dot: dropped before a port", "shop.example.com.:443", "GET", "/shop/x", "shop"},
		{"trailing dot: dropped under a wildcard", "www.shop.test.", "GET", "/shop/x", "shop"},
		{"method: the host's route has the path under another method", "only.test", "POST", "/only", "405"},
		{"method: another host does not see the route", "other.test", "GET", "/only", "404"},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, "http://placeholder"+tt.path, nil)
		req.Host = tt.host
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		got := rec.Body.String()
		if rec.Code != 200 {
			got = fmt.Sprint(rec.Code)
		}
		if got != tt.want {
			t.Errorf("%s: Host %q %s %s reached %q, want %q", tt.name, tt.host, tt.method, tt.path, got, tt.want)
		}
	}
}
