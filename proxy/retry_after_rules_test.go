package proxy_test

import (
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice/proxy"
)

// TestRetryAfterCoversEveryRule: a call refused by one rule while another
// rule of the call, which the check never reached, needs longer is told
// the longer wait. Retried after Retry-After it passes, and a second
// sooner it is still refused; RateLimit names the rule that needs longest,
// with t equal to Retry-After. Before, the client was told the first
// refusing rule's wait, and refused again when it came back. Swept over
// start phases within a second.
func TestRetryAfterCoversEveryRule(t *testing.T) {
	type step struct {
		at     time.Duration // after the case's start
		target string
	}
	cases := []struct {
		name  string
		rules string
		setup []step // calls that pass
		probe step   // refused by the first rule, the longest wait elsewhere
		// the refusal: X-Sluice-Blocked, Retry-After in seconds (0: none,
		// nor any RateLimit field: the call never passes), and the policy
		// RateLimit names ("": no RateLimit field, a guard without a quota
		// blocked)
		reason string
		retry  int
		policy string
		fails  bool // the upstream answers 500 during setup (breakers)
	}{
		{
			name: "two flow rules", rules: `
flowRules:
  - { resource: item, count: 2 }
  - { resource: item, count: 3, statIntervalMs: 10000 }
`,
			setup:  []step{{0, "/item/1"}, {1100 * time.Millisecond, "/item/1"}, {1100 * time.Millisecond, "/item/1"}},
			probe:  step{1200 * time.Millisecond, "/item/1"},
			reason: "flow", retry: 9, policy: `"item#flow2"`,
		},
		{
			name: "flow, then a param rule", rules: `
flowRules:
  - { resource: item, count: 1 }
paramRules:
  - { resource: item, param: "query:k", count: 1, durationSec: 10 }
`,
			setup:  []step{{0, "/item/1?k=z"}},
			probe:  step{100 * time.Millisecond, "/item/1?k=z"},
			reason: "flow", retry: 10, policy: `"item#param1"`,
		},
		{
			name: "one param rule, a later value", rules: `
paramRules:
  - { resource: item, param: "query:k", count: 1, durationSec: 10 }
`,
			setup:  []step{{0, "/item/1?k=a"}, {5 * time.Second, "/item/1?k=b"}},
			probe:  step{6 * time.Second, "/item/1?k=a&k=b"},
			reason: "param", retry: 9, policy: `"item"`,
		},
		{
			name: "the route's flow rule, then its API group's", rules: `
apiGroups:
  - name: items
    match: [ { prefix: /item/ } ]
flowRules:
  - { resource: item, count: 1 }
  - { resource: items, count: 2, statIntervalMs: 10000 }
`,
			setup:  []step{{0, "/item/1"}, {1500 * time.Millisecond, "/item/2"}},
			probe:  step{1600 * time.Millisecond, "/item/3"},
			reason: "flow", retry: 9, policy: `"items"`,
		},
		{
			// The system guard has no quota of its own: RateLimit names
			// the later rule that needs longest (it named none).
			name: "the system guard, then a param rule", rules: `
system: { maxQps: 1 }
paramRules:
  - { resource: item, param: "query:k", count: 1, durationSec: 10 }
`,
			setup:  []step{{0, "/item/1?k=z"}},
			probe:  step{100 * time.Millisecond, "/item/1?k=z"},
			reason: "system", retry: 10, policy: `"item"`,
		},
		{
			// The param rule never lets value "never" in: no moment to
			// tell, so no Retry-After and no RateLimit t at all.
			name: "flow, then a value a param rule never passes", rules: `
flowRules:
  - { resource: item, count: 1 }
paramRules:
  - { resource: item, param: "query:k", count: 5, items: [{ value: never, count: 0 }] }
`,
			setup:  []step{{0, "/item/1?k=x"}},
			probe:  step{100 * time.Millisecond, "/item/1?k=never"},
			reason: "flow", retry: 0,
		},
		{
			name: "flow, then an open breaker", rules: `
flowRules:
  - { resource: item, count: 1 }
degradeRules:
  - { resource: item, strategy: errorCount, threshold: 1, minRequestAmount: 1, statIntervalMs: 5000, retryTimeoutMs: 5000 }
`,
			setup:  []step{{0, "/item/1"}, {1 * time.Second, "/item/1"}},
			probe:  step{1100 * time.Millisecond, "/item/1"},
			reason: "flow", retry: 5, policy: `"item"`, fails: true,
		},
		{
			// The flow rule passes the call and gives it back when the
			// breaker refuses it: no quota blocked, so no RateLimit field
			// (docs/configuration.md), and Retry-After is the breaker's.
			name: "a flow rule that passes, then an open breaker", rules: `
flowRules:
  - { resource: item, count: 10 }
degradeRules:
  - { resource: item, strategy: errorCount, threshold: 1, minRequestAmount: 1, statIntervalMs: 5000, retryTimeoutMs: 5000 }
`,
			setup:  []step{{0, "/item/1"}, {500 * time.Millisecond, "/item/1"}},
			probe:  step{1100 * time.Millisecond, "/item/1"},
			reason: "degrade", retry: 5, fails: true,
		},
	}
	for _, tc := range cases {
		for ph := time.Duration(0); ph < time.Second; ph += 170 * time.Millisecond {
			t.Run(fmt.Sprintf("%s/phase=%v", tc.name, ph), func(t *testing.T) {
				g, clock, up := clockedGateway(t, tc.rules)
				clock.advance(ph)
				start := clock.Now()
				at := func(d time.Duration) { clock.now.Store(start + int64(d)) }
				if tc.fails {
					up.status.Store(500)
				}
				for _, s := range tc.setup {
					at(s.at)
					if w := serveTarget(g, s.target); w.Code >= 400 && w.Code != 500 {
						t.Fatalf("setup %s at +%v: %d %s", s.target, s.at, w.Code, w.Header().Get("X-Sluice-Blocked"))
					}
				}
				up.status.Store(200)
				at(tc.probe.at)
				w := serveTarget(g, tc.probe.target)
				h := w.Header()
				if tc.retry == 0 {
					if w.Code != 429 || h.Get("X-Sluice-Blocked") != tc.reason || h.Get("Retry-After") != "" || h.Get("RateLimit") != "" {
						t.Fatalf("probe: %d %s Retry-After %q RateLimit %q, want 429 %s and neither field: it never passes",
							w.Code, h.Get("X-Sluice-Blocked"), h.Get("Retry-After"), h.Get("RateLimit"), tc.reason)
					}
					return
				}
				if w.Code != 429 || h.Get("X-Sluice-Blocked") != tc.reason || h.Get("Retry-After") != strconv.Itoa(tc.retry) {
					t.Fatalf("probe: %d %s Retry-After %q, want 429 %s Retry-After %d", w.Code, h.Get("X-Sluice-Blocked"), h.Get("Retry-After"), tc.reason, tc.retry)
				}
				if tc.policy == "" {
					if h.Get("RateLimit") != "" || h.Get("RateLimit-Policy") != "" {
						t.Errorf("RateLimit %q, RateLimit-Policy %q, want neither: no quota blocked", h.Get("RateLimit"), h.Get("RateLimit-Policy"))
					}
				} else if want := fmt.Sprintf("%s;r=0;t=%d", tc.policy, tc.retry); !strings.HasPrefix(h.Get("RateLimit"), want) {
					t.Errorf("RateLimit %q, want it to start %q", h.Get("RateLimit"), want)
				}
				back := tc.probe.at + time.Duration(tc.retry)*time.Second
				at(back - time.Second)
				if w := serveTarget(g, tc.probe.target); w.Code != 429 {
					t.Errorf("a second before Retry-After: %d, want still refused", w.Code)
				}
				at(back)
				if w := serveTarget(g, tc.probe.target); w.Code != 200 {
					t.Errorf("after Retry-After: %d %s Retry-After %s, want a pass", w.Code, w.Header().Get("X-Sluice-Blocked"), w.Header().Get("Retry-After"))
				}
			})
		}
	}
}

// serveTarget is one GET of target.
func serveTarget(g *proxy.Gateway, target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	g.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
	return w
}
