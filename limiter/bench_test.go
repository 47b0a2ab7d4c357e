package limiter_test

import (
	"time"

	"sync/atomic"
	"testing"

	"sluice/config"
	"sluice/limiter"
)

// One qps reject rule that never blocks: the cost every request pays.
func BenchmarkEnterExitOneQPSRule(b *testing.B) {
	c := compile(b, qps("r", 1e9)).Checker("r", "default")
	b.ReportAllocs()
	now := t0
	for b.Loop() {
		now += 1000
		tok, v := c.Enter(now, "", 1)
		if v.Blocked {
			b.Fatal("blocked")
		}
		tok.Exit(now, false)
	}
}

func fiveMixed() []config.FlowRule {
	r := []config.FlowRule{
		qps("r", 1e9),
		{Resource: "r", LimitApp: "default", Grade: config.GradeConcurrency, Count: 1e6},
		{Resource: "r", LimitApp: "default", Grade: config.GradeQPS, Count: 1e9, ControlBehavior: config.BehaviorWarmUp, WarmUpPeriodSec: 10, ColdFactor: 3},
		{Resource: "r", LimitApp: "a,b", Grade: config.GradeQPS, Count: 1e9},
		{Resource: "r", LimitApp: "default", Grade: config.GradeQPS, Count: 1e9, Strategy: config.StrategyChain, RefResource: "web"},
	}
	return r
}

// Five mixed rules (reject, concurrency, warmUp, a per-origin list, chain).
func BenchmarkEnterExitFiveMixedRules(b *testing.B) {
	c := compile(b, fiveMixed()...).Checker("r", "web")
	b.ReportAllocs()
	now := t0
	for b.Loop() {
		now += 1000
		tok, v := c.Enter(now, "a", 1)
		if v.Blocked {
			b.Fatal("blocked")
		}
		tok.Exit(now, false)
	}
}

// The throttle check under parallel callers (the virtual queue's one CAS word).
func BenchmarkThrottleParallel(b *testing.B) {
	r := qps("r", 1e6)
	r.ControlBehavior = config.BehaviorThrottle
	r.MaxQueueingTimeMs = 500
	c := compile(b, r).Checker("r", "default")
	var clock atomic.Int64
	clock.Store(t0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			now := clock.Add(1000)
			tok, v := c.Enter(now, "", 1)
			if !v.Blocked {
				tok.Exit(now, false)
			}
		}
	})
}

func TestEnterAllocatesNothing(t *testing.T) {
	for name, c := range map[string]*limiter.Checker{
		"one":     compile(t, qps("r", 1e9)).Checker("r", "default"),
		"mixed":   compile(t, fiveMixed()...).Checker("r", "web"),
		"blocked": compile(t, qps("r", 1e9), qps("r", 0)).Checker("r", "default"),
		"throttle+other": compile(t, throttleRule(1e9, 0), app(qps("r", 1e9), "other"),
			warmRule(1e9, 10, config.BehaviorWarmUpThrottle)).Checker("r", "default"),
	} {
		now := t0
		c.Enter(now, "a", 1) // first sight of origin a allocates its node
		allocs := testing.AllocsPerRun(1000, func() {
			now += 1000
			tok, _ := c.Enter(now, "a", 1)
			tok.Exit(now, false)
		})
		if allocs > 0 {
			t.Errorf("%s: Enter+Exit allocates %v per call", name, allocs)
		}
	}
}

// A prioritized call allocates nothing either: alone on one checker, or
// held pending on two and reserved together (a route and its API group).
func TestPrioritizedAllocatesNothing(t *testing.T) {
	f := compile(t, qps("r", 1e9), qps("g", 1e9))
	r, g := f.Checker("r", "default"), f.Checker("g", "default")
	now := t0
	// As the proxy holds them: in the request's pooled state.
	held := new([2]limiter.Token)
	ts := []*limiter.Token{&held[0], &held[1]}
	allocs := testing.AllocsPerRun(1000, func() {
		now += 1000
		tok, _ := r.EnterPrioritized(now, "", 1, int64(time.Second))
		tok.Exit(now, false)
		r.EnterPending(&held[0], now, "", 1, nil)
		g.EnterPending(&held[1], now, "", 1, nil)
		var v limiter.Verdict
		limiter.Reserve(now, int64(time.Second), ts, &v)
		held[0].Exit(now, false)
		held[1].Exit(now, false)
	})
	if allocs > 0 {
		t.Errorf("prioritized Enter, and EnterPending+Reserve, allocate %v per call", allocs)
	}
}
