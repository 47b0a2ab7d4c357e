package proxy_test

import (
	"fmt"
	"testing"
	"time"
)

// TestDryRunOnPrioritizedRoute: a dryRun qps reject rule on a prioritized
// route, the route's own or its API group's, counts (the resource's
// observer: sluice_blocked_total{reason="dryrun"}) exactly the calls the
// same rule enforced refuses: a call that finds the window full but room
// within occupyTimeoutMs waits when enforced, which is no block. The same
// calls (one in four on a plain route of the group) run on synthetic time
// against the rule enforced and dryRun, swept over counts, overloads,
// start phases and timeouts; the dryRun gateway refuses and delays none.
func TestDryRunOnPrioritizedRoute(t *testing.T) {
	for _, res := range []string{"hello", "grp"} {
		for _, count := range []int{1, 2, 3, 5} {
			for _, over := range []float64{1.5, 3} {
				for _, occupy := range []int{200, 1000} {
					for _, phase := range []time.Duration{0, 413 * time.Millisecond} {
						name := fmt.Sprintf("%s/count=%d/over=%gx/occupy=%dms/phase=%v", res, count, over, occupy, phase)
						t.Run(name, func(t *testing.T) {
							refused := dryRunPrioritizedCalls(t, res, count, over, occupy, phase, false)
							would := dryRunPrioritizedCalls(t, res, count, over, occupy, phase, true)
							if refused == 0 && over >= 3 || would != refused {
								t.Errorf("dryRun counted %d would-be blocks, the enforced rule refused %d", would, refused)
							}
						})
					}
				}
			}
		}
	}
}

// dryRunPrioritizedCalls drives 4 s of calls at over times count a second
// against a rule of count on res and returns the enforced rule's
// refusals, or the dryRun rule's would-be blocks.
func dryRunPrioritizedCalls(t *testing.T, res string, count int, over float64, occupy int, phase time.Duration, dry bool) int {
	t.Helper()
	g, clock, up, obs := grpGateway(t, fmt.Sprintf(`
upstreams:
  up:
    targets: ["http://upstream.invalid"]
routes:
  - { path: "/hello/{id}", upstream: up, resource: hello, prioritized: true, occupyTimeoutMs: %d }
  - { path: "/plain/{id}", upstream: up, resource: plain }
apiGroups:
  - name: grp
    match: [{ prefix: /hello/ }, { prefix: /plain/ }]
flowRules:
  - { resource: %s, count: %d, dryRun: %v }
`, occupy, res, count, dry))
	start := int64(1000*time.Second + phase)
	step := float64(time.Second) / (float64(count) * over)
	calls := 0
	for i := 0; ; i++ {
		now := start + int64(float64(i)*step)
		if now >= start+int64(4*time.Second) {
			break
		}
		// Set, not advanced: a waiting call's sleep moved the clock on.
		clock.now.Store(now)
		path := "/hello/1"
		if i%4 == 3 {
			path = "/plain/1"
		}
		code, blocked := grpDo(g, "GET", path)
		if dry && (code != 200 || blocked != "") {
			t.Fatalf("call %d: a dryRun rule refused it: %d %q", i, code, blocked)
		}
		calls++
	}
	if dry {
		if w := clock.waits(); len(w) != 0 {
			t.Fatalf("a dryRun rule delayed calls: waits %v", w)
		}
		if n := int(up.calls.Load()); n != calls {
			t.Fatalf("%d of %d calls forwarded", n, calls)
		}
		return obs.get(res + " dryrun")
	}
	return obs.get(res + " block:flow")
}
