package limiter_test

import (
	"testing"

	"sluice/config"
)

// A dryRun rule's state evolves as if it were enforced (nginx
// limit_req_dry_run: excess requests are "accounted as usual"), so its
// would-be blocks are the blocks the rule would make once enforced: at 20
// calls a second against count 5, 15 a second, not every call once the
// window is full of the calls it let through anyway.
func TestDryRunCountsWouldBeBlocksAsIfEnforced(t *testing.T) {
	warm := qps("r", 5)
	warm.ControlBehavior, warm.WarmUpPeriodSec, warm.ColdFactor = config.BehaviorWarmUp, 1, 3
	thr := qps("r", 5)
	thr.ControlBehavior = config.BehaviorThrottle
	wthr := warm
	wthr.ControlBehavior = config.BehaviorWarmUpThrottle
	for _, c := range []struct {
		name string
		rule config.FlowRule
	}{
		{"reject", qps("r", 5)},
		{"throttle", thr},
		// warm-up starts cold: 1 a second, then 5 (period 1 s).
		{"warmUp", warm},
		{"warmUpThrottle", wthr},
	} {
		t.Run(c.name, func(t *testing.T) {
			enforced := c.rule
			dry := c.rule
			dry.DryRun = true
			ce := compile(t, enforced).Checker("r", "default")
			cd := compile(t, dry).Checker("r", "default")
			blocks, would := 0, 0
			for i := range 60 { // 20 a second for 3 s
				now := t0 + int64(i)*50*ms
				te, ve := ce.Enter(now, "", 1)
				if ve.Blocked {
					blocks++
				}
				te.Exit(now, false)
				td, vd := cd.Enter(now, "", 1)
				if vd.Blocked {
					t.Fatalf("call %d: a dryRun rule blocked", i)
				}
				would += vd.DryRun
				td.Exit(now, false)
			}
			if blocks == 0 || would != blocks {
				t.Errorf("dryRun reported %d would-be blocks, the enforced rule blocked %d", would, blocks)
			}
		})
	}
}

// A concurrency dryRun rule counts every call really in flight, so a
// would-be block is one that finds count calls in flight.
func TestDryRunConcurrencyCountsRealInFlight(t *testing.T) {
	r := qps("r", 2)
	r.Grade, r.DryRun = config.GradeConcurrency, true
	c := compile(t, r).Checker("r", "default")
	a, v1 := c.Enter(t0, "", 1)
	b, v2 := c.Enter(t0, "", 1)
	x, v3 := c.Enter(t0, "", 1)
	if v1.DryRun+v2.DryRun != 0 || v3.DryRun != 1 || v3.Blocked {
		t.Fatalf("3 calls in flight against 2: dryRun %d %d %d blocked %v", v1.DryRun, v2.DryRun, v3.DryRun, v3.Blocked)
	}
	a.Exit(t0, false)
	if _, v := c.Enter(t0, "", 1); v.DryRun != 1 {
		t.Errorf("after one of 3 ended, 2 in flight: dryRun %d, want 1", v.DryRun)
	}
	b.Exit(t0, false)
	x.Exit(t0, false)
}
