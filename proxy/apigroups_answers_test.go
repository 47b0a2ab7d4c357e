package proxy_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// TestPrioritizedGroupBlockNamesGroup: a call a group's rule blocks gets
// its route's block answer with the group's name as {{.Resource}}
// (docs/rules.md, API groups). A prioritized call refused because the
// group's window had no room within occupyTimeoutMs once named the
// route's resource, which has no rule at all.
func TestPrioritizedGroupBlockNamesGroup(t *testing.T) {
	cfg, err := config.Parse("prio.yaml", []byte(`
upstreams:
  up:
    targets: ["http://upstream.invalid"]
routes:
  - { path: "/order/{id}", upstream: up, resource: get-order, prioritized: true, occupyTimeoutMs: 100 }
apiGroups:
  - name: orders-api
    match: [ { prefix: /order/ } ]
flowRules:
  - { resource: orders-api, count: 1 }
`))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{}
	clock.advance(1000 * time.Second)
	up := &stubUpstream{}
	up.status.Store(200)
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: clock, Transport: up, Forwarder: "standard"})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	get := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("GET", "/order/1", nil))
		return w
	}
	if w := get(); w.Code != 200 {
		t.Fatalf("first call: %d, want 200", w.Code)
	}
	w := get() // the group's window has room again only in ~1 s, beyond occupyTimeoutMs
	if w.Code != 429 {
		t.Fatalf("second call: %d, want 429", w.Code)
	}
	if body := w.Body.String(); !strings.Contains(body, `"resource":"orders-api"`) {
		t.Errorf("block body %s names the route's resource; the group orders-api's rule blocked it", body)
	}
}

// TestGroupQuotaInRateLimitFields: an API group's qps rule is one of the
// quotas RateLimit lists (SPEC §4), named after the group: on a pass it
// counted and on the 429 it gave. A route whose only limit was a group's
// rule once sent no RateLimit fields at all.
func TestGroupQuotaInRateLimitFields(t *testing.T) {
	// Control: the same rule on the route's own resource sends the fields.
	ctl, _, _, _ := groupsGateway(t, `
flowRules:
  - { resource: get-order, count: 2 }
`)
	cw := httptest.NewRecorder()
	ctl.ServeHTTP(cw, httptest.NewRequest("GET", "/order/1", nil))
	if cw.Header().Get("RateLimit-Policy") == "" {
		t.Fatal("control: a route rule sends no RateLimit-Policy either")
	}
	g, _, _, _ := groupsGateway(t, `
flowRules:
  - { resource: orders-api, count: 2 }
`)
	get := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("GET", "/order/1", nil))
		return w
	}
	w := get()
	if w.Code != 200 {
		t.Fatalf("first call: %d", w.Code)
	}
	if p := w.Header().Get("RateLimit-Policy"); !strings.Contains(p, "orders-api") {
		t.Errorf("pass counted by the group's qps rule: RateLimit-Policy %q, RateLimit %q; want the group's policy",
			p, w.Header().Get("RateLimit"))
	}
	get()
	w = get()
	if w.Code != 429 {
		t.Fatalf("third call: %d, want 429", w.Code)
	}
	if r := w.Header().Get("RateLimit"); !strings.Contains(r, "orders-api") {
		t.Errorf("429 by the group's rule: RateLimit %q, RateLimit-Policy %q; want the blocking group rule's fields",
			r, w.Header().Get("RateLimit-Policy"))
	}
}
