package proxy_test

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// TestEditedParamRuleCarriesItsBuckets: a reload that edits a param rule
// carries each value's bucket as it stands on the gateway's clock: order 5
// spent 2 of 2 a minute, raised to 3, has 1 left, where it had 3 (a fresh
// burst for every value at each edit); order 6, never seen, has its 3.
func TestEditedParamRuleCarriesItsBuckets(t *testing.T) {
	rules := func(count int) *config.Config {
		cfg, err := config.Parse("params.yaml", []byte(fmt.Sprintf(`
upstreams:
  up:
    targets: ["http://upstream.invalid"]
routes:
  - { path: "/order/{id}", upstream: up, resource: get-order }
paramRules:
  - { resource: get-order, param: "path:id", count: %d, durationSec: 60 }
`, count)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	clock := &fakeClock{}
	clock.advance(1000 * time.Second)
	up := &stubUpstream{}
	up.status.Store(200)
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: clock, Transport: up, Forwarder: "standard"})
	if err := g.Load(rules(2)); err != nil {
		t.Fatal(err)
	}
	passes := func(id string, n int) int {
		ok := 0
		for range n {
			w := httptest.NewRecorder()
			g.ServeHTTP(w, httptest.NewRequest("GET", "/order/"+id, nil))
			if w.Code == 200 {
				ok++
			}
		}
		return ok
	}
	if got := passes("5", 3); got != 2 {
		t.Fatalf("count 2 a minute: %d of 3 passed", got)
	}
	clock.advance(time.Second)
	if err := g.Load(rules(3)); err != nil {
		t.Fatal(err)
	}
	if got := passes("5", 3); got != 1 {
		t.Errorf("raised to 3 after order 5 spent 2: %d of 3 passed, want 1", got)
	}
	if got := passes("6", 4); got != 3 {
		t.Errorf("a new value after the edit: %d of 4 passed, want 3", got)
	}
}
