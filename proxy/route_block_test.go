package proxy_test

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// TestRouteBlockResponse: a route's blockResponse overrides the top-level
// fields it sets and keeps the others; a redirect answers 302 with
// Location, no body and no RateLimit fields; rateLimitHeaders: false on a
// route hides them on its passes too.
func TestRouteBlockResponse(t *testing.T) {
	up := startRawUpstream(t, 2)
	cfg, err := config.Parse("block.yaml", []byte(fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
routes:
  - path: /top
    upstream: up
  - path: /own
    upstream: up
    blockResponse: { status: 503, body: 'busy {{.Resource}}' }
  - path: /away
    upstream: up
    blockResponse: { redirect: "https://status.example.com/down" }
  - path: /quiet
    upstream: up
    blockResponse: { rateLimitHeaders: false }
  - path: /legacy
    upstream: up
    blockResponse: { legacyHeaders: true }
flowRules:
  - { resource: /top, count: 1, statIntervalMs: 60000 }
  - { resource: /own, count: 1, statIntervalMs: 60000 }
  - { resource: /away, count: 1, statIntervalMs: 60000 }
  - { resource: /quiet, count: 1, statIntervalMs: 60000 }
  - { resource: /legacy, count: 1, statIntervalMs: 60000 }
blockResponse:
  contentType: text/plain
  body: 'blocked {{.Resource}}'
`, up)))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	tests := []struct {
		path, status, contentType, body, location string
		headers                                   bool // RateLimit on the pass and the block
	}{
		{"/top", "429", "text/plain", "blocked /top", "", true},
		{"/own", "503", "text/plain", "busy /own", "", true},
		{"/away", "302", "", "", "https://status.example.com/down", true},
		{"/quiet", "429", "text/plain", "blocked /quiet", "", false},
		{"/legacy", "429", "text/plain", "blocked /legacy", "", true},
	}
	for _, tc := range tests {
		pass := httptest.NewRecorder()
		g.ServeHTTP(pass, httptest.NewRequest("GET", tc.path, nil))
		if pass.Code != 200 || (pass.Header().Get("RateLimit") != "") != tc.headers {
			t.Errorf("%s pass: %d, RateLimit %q; want 200, RateLimit %v", tc.path, pass.Code, pass.Header().Get("RateLimit"), tc.headers)
		}
		// X-RateLimit-*: the same quota as RateLimit, on /legacy only.
		legacy := fmt.Sprintf("%s %s %s", pass.Header().Get("X-RateLimit-Limit"), pass.Header().Get("X-RateLimit-Remaining"),
			pass.Header().Get("X-RateLimit-Reset"))
		if want := map[bool]string{true: "1 0 60", false: "  "}[tc.path == "/legacy"]; legacy != want {
			t.Errorf("%s pass: X-RateLimit-Limit, -Remaining, -Reset %q, want %q (RateLimit %q)", tc.path, legacy, want,
				pass.Header().Get("RateLimit"))
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("GET", tc.path, nil))
		h := w.Header()
		got := fmt.Sprint(w.Code)
		if got != tc.status || h.Get("Content-Type") != tc.contentType || w.Body.String() != tc.body || h.Get("Location") != tc.location {
			t.Errorf("%s block: %s %q %q Location %q; want %s %q %q Location %q", tc.path, got, h.Get("Content-Type"), w.Body.String(),
				h.Get("Location"), tc.status, tc.contentType, tc.body, tc.location)
		}
		if h.Get("X-Sluice-Blocked") != "flow" {
			t.Errorf("%s block: X-Sluice-Blocked %q, want flow", tc.path, h.Get("X-Sluice-Blocked"))
		}
		wantRL := tc.headers && tc.location == ""
		if (h.Get("RateLimit") != "") != wantRL || (h.Get("Retry-After") != "") != (tc.location == "") {
			t.Errorf("%s block: RateLimit %q, Retry-After %q; want RateLimit %v, Retry-After %v", tc.path, h.Get("RateLimit"),
				h.Get("Retry-After"), wantRL, tc.location == "")
		}
	}
}
