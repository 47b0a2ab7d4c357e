package limiter_test

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter"
	"sluice/limiter/window"
)

// A dryRun rule is evaluated and counted but never blocks; the rules after it
// still apply.
func TestDryRun(t *testing.T) {
	dry := qps("r", 2)
	dry.DryRun = true
	c := compile(t, dry, qps("r", 4)).Checker("r", "default")
	for i, want := range []struct {
		blocked bool
		dry     int
	}{{false, 0}, {false, 0}, {false, 1}, {false, 1}, {true, 1}} {
		_, v := c.Enter(t0, "", 1)
		if v.Blocked != want.blocked || v.DryRun != want.dry {
			t.Errorf("call %d: blocked %v dryRun %d, want %v %d", i, v.Blocked, v.DryRun, want.blocked, want.dry)
		}
		if v.HasQuota && v.Quota.Limit != 4 {
			t.Errorf("call %d: quota of the dryRun rule: %+v", i, v.Quota)
		}
	}
}

// Cancel takes the call's counts back: by a later guard it counts as a block,
// by a departed client as nothing.
func TestCancelRollsBack(t *testing.T) {
	f := compile(t, qps("r", 2))
	c := f.Checker("r", "default")
	a, _ := c.Enter(t0, "x", 1)
	b, _ := c.Enter(t0, "x", 1)
	if _, v := c.Enter(t0, "x", 1); !v.Blocked {
		t.Fatal("third call passed")
	}
	a.Cancel(t0+ms, limiter.ReasonParam)
	b.Cancel(t0+ms, limiter.ReasonNone)
	for i := range 2 {
		tok, v := c.Enter(t0+2*ms, "x", 1)
		if v.Blocked {
			t.Errorf("call %d after two cancels blocked", i)
		}
		tok.Exit(t0+2*ms, false)
	}
	st := f.Stats(t0 + 3*ms)[0]
	want := limiter.NodeStats{PassQps: 2, BlockQps: 2, SuccessQps: 2}
	if st.Node != want || len(st.Origins) != 1 || st.Origins[0].NodeStats != want {
		t.Errorf("stats %+v, want node and origin %+v", st, want)
	}
}

// A call blocked by a later rule gives back what earlier rules counted.
func TestLaterBlockRollsBackEarlierRules(t *testing.T) {
	conc := config.FlowRule{Resource: "r", LimitApp: "default", Grade: config.GradeConcurrency, Count: 1}
	c := compile(t, qps("r", 3), conc).Checker("r", "default")
	first, _ := c.Enter(t0, "", 1)
	for range 10 {
		if _, v := c.Enter(t0, "", 1); !v.Blocked {
			t.Fatal("passed with one in flight")
		}
	}
	first.Exit(t0, false)
	for i, want := range []bool{false, false, true} {
		tok, v := c.Enter(t0, "", 1)
		if v.Blocked != want {
			t.Errorf("call %d: blocked %v, want %v", i, v.Blocked, want)
		}
		tok.Exit(t0, false)
	}
}

// Compile keeps the state of a rule whose definition is unchanged (a moved
// line does not count) and resets a changed one; in-flight calls of the old
// Flow release into the new one.
func TestCompileCarriesState(t *testing.T) {
	r := qps("r", 2)
	r.Line = 10
	conc := config.FlowRule{Resource: "r", LimitApp: "default", Grade: config.GradeConcurrency, Count: 1, Line: 11}
	f1 := compile(t, r, conc)
	c1 := f1.Checker("r", "default")
	held, _ := c1.Enter(t0, "", 1)

	r.Line, conc.Line = 20, 21
	f2 := limiter.Compile(defaulted(r, conc), f1, limiter.Options{})
	c2 := f2.Checker("r", "default")
	if _, v := c2.Enter(t0, "", 1); !v.Blocked {
		t.Errorf("unchanged concurrency rule forgot its call in flight")
	}
	held.Exit(t0, false) // ends in the old Flow, releases the shared state
	tok, v := c2.Enter(t0, "", 1)
	if v.Blocked {
		t.Fatalf("blocked after the old call ended")
	}
	tok.Exit(t0, false)
	if _, v := c2.Enter(t0, "", 1); !v.Blocked {
		t.Errorf("unchanged qps rule forgot its window (3rd pass of 2)")
	}
	if st := f2.Stats(t0)[0].Node; st.PassQps != 2 {
		t.Errorf("resource stats not carried: %+v", st)
	}

	// A changed count judges the passes already in the window (adoptState).
	r.Count = 3
	f3 := limiter.Compile(defaulted(r, conc), f2, limiter.Options{})
	c3 := f3.Checker("r", "default")
	for i, want := range []bool{false, true} {
		tok, v := c3.Enter(t0, "", 1)
		if v.Blocked != want {
			t.Errorf("count 2 -> 3 with 2 passes in the window: call %d blocked %v, want %v", i, v.Blocked, want)
		}
		tok.Exit(t0, false)
	}
}

// A changed reject rule judges the passes its old window holds under its
// new count and interval, and a changed throttle rule queues after the old
// queue's last slot: an operator who lowered a limit during an incident let
// the new limit's worth in on top of what had just passed (20 a second
// lowered to 10 passed 30 in one real second; raised to 30, 50). Swept over
// old and new counts, intervals and limitApp kinds; another strategy is
// another rule and starts empty.
func TestChangedRuleCarriesItsWindow(t *testing.T) {
	const sec = int64(time.Second)
	for _, app := range []string{"default", "a", "a, b"} {
		for _, from := range []float64{2, 5, 20} {
			for _, to := range []float64{1, 3, 10, 30} {
				for _, iv := range []int64{1000, 2000} {
					old := config.FlowRule{Resource: "r", LimitApp: app, Count: from}
					f1 := compile(t, old)
					c1 := f1.Checker("r", "default")
					filled := 0
					for range int(from) {
						if _, v := c1.Enter(t0, "a", 1); !v.Blocked {
							filled++
						}
					}
					nr := old
					nr.Count, nr.StatIntervalMs = to, iv
					f2 := limiter.Compile(defaulted(nr), f1, limiter.Options{})
					c2 := f2.Checker("r", "default")
					at := t0 + sec/2 // within both windows of the passes at t0
					want := max(int(to)-filled, 0)
					got := 0
					for range int(to) + 1 {
						if _, v := c2.Enter(at, "a", 1); !v.Blocked {
							got++
						}
					}
					if got != want {
						t.Errorf("limitApp %q, count %v -> %v, %d ms, %d passes in the window: %d more passed, want %d", app, from, to, iv, filled, got, want)
					}
					// Once the old passes leave the new interval, the new
					// count is whole again.
					later := t0 + iv*int64(time.Millisecond) + sec
					got = 0
					for range int(to) + 1 {
						if _, v := c2.Enter(later, "a", 1); !v.Blocked {
							got++
						}
					}
					if got != int(to) {
						t.Errorf("limitApp %q, count %v -> %v, %d ms, a window later: %d passed, want %d", app, from, to, iv, got, int(to))
					}
				}
			}
		}
	}
	// A throttle queue: 10 a second queued 5 calls, the last at +400 ms;
	// lowered to 5 a second, the next call queues 200 ms after it.
	thr := config.FlowRule{Resource: "r", Count: 10, ControlBehavior: config.BehaviorThrottle, MaxQueueingTimeMs: 1000}
	f1 := compile(t, thr)
	c1 := f1.Checker("r", "default")
	for range 5 {
		c1.Enter(t0, "", 1)
	}
	thr.Count = 5
	f2 := limiter.Compile(defaulted(thr), f1, limiter.Options{})
	if _, v := f2.Checker("r", "default").Enter(t0, "", 1); v.Blocked || v.Wait != 600*time.Millisecond {
		t.Errorf("throttle 10/s -> 5/s behind a queue reaching +400 ms: %+v, want a wait of 600 ms", v)
	}
	// Another strategy is another rule: it starts empty.
	f1 = compile(t, qps("r", 1))
	f1.Checker("r", "default").Enter(t0, "", 1)
	chain := qps("r", 1)
	chain.Strategy, chain.RefResource = config.StrategyChain, "entry"
	f2 = limiter.Compile(defaulted(chain), f1, limiter.Options{})
	if got := passes(f2.Checker("r", "entry"), "", 2); got != 1 {
		t.Errorf("a chain rule replacing a direct one: %d of 2 passed, want 1", got)
	}
}

// A changed concurrency rule counts the calls in flight that the rule it
// replaces let in: lowering a limit during an incident must not let the new
// limit's worth of calls in on top of those running. The calls end in the
// old Flow and free the new rule's room. Swept over old and new counts, per
// limitApp kind, and a changed strategy (a different rule: starts afresh).
func TestChangedConcurrencyRuleCountsCallsInFlight(t *testing.T) {
	conc := func(count float64, app string) config.FlowRule {
		return config.FlowRule{Resource: "r", LimitApp: app, Grade: config.GradeConcurrency, Count: count}
	}
	for _, app := range []string{"default", "a", "a, b"} {
		for _, from := range []float64{1, 2, 5} {
			for _, to := range []float64{1, 3, 6} {
				f1 := compile(t, conc(from, app))
				c1 := f1.Checker("r", "default")
				var held []limiter.Token
				for range int(from) {
					tok, v := c1.Enter(t0, "a", 1)
					if v.Blocked {
						t.Fatalf("%s %v: blocked filling the old rule", app, from)
					}
					held = append(held, tok)
				}
				f2 := limiter.Compile(defaulted(conc(to, app)), f1, limiter.Options{})
				c2 := f2.Checker("r", "default")
				want := max(int(to)-int(from), 0)
				if got := passes(c2, "a", int(to)+1); got != want {
					t.Errorf("limitApp %q, count %v -> %v with %v in flight: %d more passed, want %d", app, from, to, from, got, want)
				}
				for i := range held {
					held[i].Exit(t0, false)
				}
				if got := passes(c2, "a", int(to)+1); got != int(to) {
					t.Errorf("limitApp %q, count %v -> %v after the old calls ended: %d passed, want %d", app, from, to, got, int(to))
				}
			}
		}
	}
	// Another strategy is another rule: it counts from 0.
	f1 := compile(t, conc(1, "default"))
	held, _ := f1.Checker("r", "default").Enter(t0, "", 1)
	chain := conc(1, "default")
	chain.Strategy, chain.RefResource = config.StrategyChain, "entry"
	f2 := limiter.Compile(defaulted(chain), f1, limiter.Options{})
	if got := passes(f2.Checker("r", "entry"), "", 2); got != 1 {
		t.Errorf("a chain rule replacing a direct one: %d of 2 passed, want 1", got)
	}
	held.Exit(t0, false)
}

// passes enters n calls of origin at once, holds them, and says how many
// passed; the passed calls end before it returns.
func passes(c *limiter.Checker, origin string, n int) int {
	var held []limiter.Token
	for range n {
		if tok, v := c.Enter(t0, origin, 1); !v.Blocked {
			held = append(held, tok)
		}
	}
	for i := range held {
		held[i].Exit(t0, false)
	}
	return len(held)
}

// Identical duplicates are matched by occurrence.
func TestCompileDuplicates(t *testing.T) {
	f1 := compile(t, qps("r", 1), qps("r", 1))
	f1.Checker("r", "default").Enter(t0, "", 1)
	f2 := limiter.Compile(defaulted(qps("r", 1)), f1, limiter.Options{})
	if _, v := f2.Checker("r", "default").Enter(t0, "", 1); !v.Blocked {
		t.Errorf("the kept duplicate forgot its pass")
	}
	if got := f2.Rules(); len(got) != 1 {
		t.Errorf("Rules() = %v", got)
	}
}

// 64 goroutines against a concurrency rule of 5 never see more than 5 in flight.
func TestConcurrencyNeverExceeded(t *testing.T) {
	r := config.FlowRule{Resource: "r", LimitApp: "default", Grade: config.GradeConcurrency, Count: 5}
	c := compile(t, r).Checker("r", "default")
	var inFlight, peak, passed atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				now := t0 + int64(g*2000+i)
				tok, v := c.Enter(now, "", 1)
				if v.Blocked {
					continue
				}
				n := inFlight.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				passed.Add(1)
				inFlight.Add(-1)
				if i%2 == 0 {
					tok.Exit(now, i%4 == 0)
				} else {
					tok.Cancel(now, limiter.ReasonDegrade)
				}
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > 5 {
		t.Errorf("%d in flight, limit 5", p)
	}
	if passed.Load() == 0 {
		t.Error("nothing passed")
	}
	if tok, v := c.Enter(t0, "", 5); v.Blocked {
		t.Errorf("in-flight count leaked: 5 no longer fit")
	} else {
		tok.Exit(t0, false)
	}
}

type fakeCluster struct {
	ok       bool
	err      error
	keys     []string
	reports  []bool // whether each call asked what a pass leaves
	gateways int
	retry    time.Duration // a block's
	left     int64         // a reported pass's
	reset    time.Duration
}

func (f *fakeCluster) Gateways() int { return max(f.gateways, 1) }

func (f *fakeCluster) AcquireFlow(r *config.FlowRule, key string, n int64, report bool) (bool, time.Duration, int64, time.Duration, error) {
	f.keys = append(f.keys, key)
	f.reports = append(f.reports, report)
	switch {
	case !f.ok && f.err == nil:
		return false, f.retry, -1, 0, nil
	case f.ok && report:
		return true, 0, f.left, f.reset, nil
	}
	return f.ok, 0, -1, 0, f.err
}

func TestClusterMode(t *testing.T) {
	no := false
	tests := []struct {
		name     string
		ok       bool
		err      error
		fallback *bool
		passes   int // of 10 calls against a cluster rule of count 2
	}{
		{"token service allows", true, nil, nil, 10},
		{"token service denies", false, nil, nil, 0},
		{"redis down, fallback to local", false, errors.New("down"), nil, 2},
		{"redis down, no fallback: pass", false, errors.New("down"), &no, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := app(qps("r", 2), "a")
			r.ClusterMode = true
			r.ClusterConfig.FallbackToLocalWhenFail = tt.fallback
			svc := &fakeCluster{ok: tt.ok, err: tt.err}
			f := limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: svc})
			if got := passedOf(f.Checker("r", "default"), t0, "a")["a"]; got != tt.passes {
				t.Errorf("passed %d, want %d", got, tt.passes)
			}
			if len(svc.keys) == 0 || svc.keys[0] != "a" {
				t.Errorf("keys %v, want origin a", svc.keys)
			}
		})
	}
}

// A cluster block says when to retry: the token service's answer becomes
// the verdict's RetryAfter (Retry-After on the 429).
func TestClusterBlockCarriesRetry(t *testing.T) {
	r := qps("r", 2)
	r.ClusterMode = true
	svc := &fakeCluster{ok: false, retry: 700 * time.Millisecond}
	c := limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: svc}).Checker("r", "default")
	if _, v := c.Enter(t0, "", 1); !v.Blocked || v.Reason != limiter.ReasonFlow || v.RetryAfter != 700*time.Millisecond {
		t.Fatalf("cluster block: %+v, want blocked for flow with RetryAfter 700ms", v)
	}
}

// quotaLog records the quotas a call's rules report, in order.
type quotaLog []limiter.Quota

func (l *quotaLog) Quota(q limiter.Quota) { *l = append(*l, q) }

// A block decided in Redis reports its rule's quota with nothing left
// until the window frees, last, as a local block does: so the 429's
// RateLimit names the rule that blocked, not an earlier rule with room
// left (which said r=99 on a refused call).
func TestClusterBlockReportsItsQuota(t *testing.T) {
	shared := qps("r", 3)
	shared.ClusterMode = true
	for _, sink := range []bool{false, true} {
		svc := &fakeCluster{ok: false, retry: 700 * time.Millisecond}
		c := limiter.Compile(defaulted(qps("r", 100), shared), nil, limiter.Options{Cluster: svc}).Checker("r", "default")
		var got quotaLog
		var s limiter.QuotaSink
		if sink {
			s = &got
		}
		v := c.EnterQuotas(new(limiter.Token), t0, "", 1, -1, s)
		want := limiter.Quota{Policy: "r", Kind: limiter.ReasonFlow, Rule: 1, Limit: 3, Window: time.Second,
			Remaining: 0, Reset: 700 * time.Millisecond}
		if !v.Blocked || !v.HasQuota || v.Quota != want {
			t.Fatalf("sink %v: verdict %+v, want blocked with quota %+v", sink, v, want)
		}
		if sink && (len(got) != 2 || got[0].Rule != 0 || got[1] != want) {
			t.Errorf("sink got %+v, want the local rule's quota, then %+v", got, want)
		}
	}
}

// A pass decided in Redis reports its rule's quota as Redis gave it (what
// the window has left, and when its oldest pass leaves it) in file order
// with the local rules' quotas; Redis is asked for those figures only when
// the caller collects quotas. An avgLocal rule's limit is count x the live
// gateways, as Redis counts it.
func TestClusterPassReportsItsQuota(t *testing.T) {
	shared := qps("r", 30)
	shared.ClusterMode = true
	avg := shared
	avg.ClusterConfig.ThresholdType = config.ThresholdAvgLocal
	for _, c := range []struct {
		name   string
		rule   config.FlowRule
		limit  float64
		window time.Duration
	}{
		{"global", shared, 30, time.Second},
		{"avgLocal on 3 gateways", avg, 90, time.Second},
		{"avgLocal 2.5 on 3 gateways", func() config.FlowRule { r := avg; r.Count = 2.5; return r }(), 7, time.Second}, // Redis's floor(7.5)
		// Under one call a second, as Redis counts it: whole calls over the
		// fewest whole seconds that hold one.
		{"global 0.5", func() config.FlowRule { r := shared; r.Count = 0.5; return r }(), 1, 2 * time.Second},
		{"avgLocal 0.2 on 3 gateways", func() config.FlowRule { r := avg; r.Count = 0.2; return r }(), 1, 2 * time.Second},
		{"dryRun", func() config.FlowRule { r := shared; r.DryRun = true; return r }(), 0, time.Second},
	} {
		svc := &fakeCluster{ok: true, left: 17, reset: 400 * time.Millisecond, gateways: 3}
		ch := limiter.Compile(defaulted(qps("r", 100), c.rule), nil, limiter.Options{Cluster: svc}).Checker("r", "default")
		var got quotaLog
		var tok limiter.Token
		v := ch.EnterQuotas(&tok, t0, "", 1, -1, &got)
		tok.Exit(t0, false)
		want := limiter.Quota{Policy: "r", Kind: limiter.ReasonFlow, Rule: 1, Limit: c.limit, Window: c.window,
			Remaining: 17, Reset: 400 * time.Millisecond}
		if c.rule.DryRun {
			// A dryRun rule reports no quota, and Redis is not asked for one.
			if v.Blocked || len(got) != 1 || !slices.Equal(svc.reports, []bool{false}) {
				t.Errorf("%s: verdict %+v, quotas %+v, asked to report %v; want a pass with the local rule's quota only, nothing asked",
					c.name, v, got, svc.reports)
			}
			continue
		}
		if v.Blocked || len(got) != 2 || got[0].Rule != 0 || got[0].Remaining != 99 || got[1] != want {
			t.Errorf("%s: verdict %+v, quotas %+v; want a pass with the local rule's quota, then %+v", c.name, v, got, want)
		}
		tok, _ = ch.Enter(t0, "", 1)
		tok.Exit(t0, false)
		if !slices.Equal(svc.reports, []bool{true, false}) {
			t.Errorf("%s: asked Redis to report %v, want [true false] (only for a caller that collects quotas)", c.name, svc.reports)
		}
	}
}

// When Redis fails mid-interval, the local fallback counts what the cluster
// already let through this gateway: a Redis hiccup does not grant a second
// full count within one interval.
func TestClusterFallbackSeesClusterPasses(t *testing.T) {
	for _, limitApp := range []string{"default", "a"} {
		r := app(qps("r", 10), limitApp)
		r.ClusterMode = true
		svc := &fakeCluster{ok: true}
		f := limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: svc})
		c := f.Checker("r", "default")
		for range 6 {
			tok, v := c.Enter(t0, "a", 1)
			if v.Blocked {
				t.Fatalf("%s: the cluster allowed the call, the checker blocked it", limitApp)
			}
			tok.Exit(t0, false)
		}
		// A call the cluster let through but a later guard stopped is
		// not counted.
		tok, _ := c.Enter(t0, "a", 1)
		tok.Cancel(t0, limiter.ReasonParam)

		svc.ok, svc.err = false, errors.New("redis down")
		if got := passedOf(c, t0+100*ms, "a")["a"]; got != 4 {
			t.Errorf("limitApp %s: after 6 cluster passes, the local fallback passed %d of 10 in the same second, want 4", limitApp, got)
		}
	}
}

// Block counts a call stopped by an earlier guard on the checker's nodes.
func TestBlockAndStats(t *testing.T) {
	f := compile(t)
	c := f.Checker("unknown", "web")
	c.Block(t0, "a", 2)
	tok, v := c.Enter(t0, "a", 1)
	if v.Blocked || v.HasQuota {
		t.Fatalf("no rules: %+v", v)
	}
	tok.Exit(t0+50*ms, true)
	st := f.Stats(t0 + 100*ms)
	want := limiter.NodeStats{PassQps: 1, BlockQps: 2, ErrorQps: 1, AvgRtMs: 50}
	if len(st) != 1 || st[0].Resource != "unknown" || st[0].Node != want || st[0].Origins[0].NodeStats != want || st[0].Entrances[0].Name != "web" || st[0].Entrances[0].NodeStats != want {
		t.Errorf("stats %+v, want %+v everywhere", st, want)
	}
	if st := f.Stats(t0 + 2*sec); st[0].Node != (limiter.NodeStats{}) {
		t.Errorf("stats 2 s later %+v, want zero", st[0].Node)
	}
}

// Add-then-check: 64 goroutines racing at one instant pass exactly count.
func TestRejectExactUnderConcurrency(t *testing.T) {
	for _, count := range []float64{1, 100, 1000} {
		c := compile(t, qps("r", count)).Checker("r", "default")
		var passed atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					if tok, v := c.Enter(t0, "", 1); !v.Blocked {
						passed.Add(1)
						tok.Exit(t0, false)
					}
				}
			}()
		}
		wg.Wait()
		if got := passed.Load(); got != int64(count) {
			t.Errorf("count %v: %d passed", count, got)
		}
	}
}

// Reloads while 32 goroutines run against a concurrency rule of 5: calls
// entered through an old Flow end in the shared state, so the limit holds
// throughout and nothing is lost or released twice.
func TestConcurrencyAcrossReloads(t *testing.T) {
	r := config.FlowRule{Resource: "r", LimitApp: "default", Grade: config.GradeConcurrency, Count: 5}
	f := compile(t, r)
	var cur atomic.Pointer[limiter.Checker]
	cur.Store(f.Checker("r", "default"))
	var inFlight, peak atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				now := t0 + int64(g*1_000_000+i)
				tok, v := cur.Load().Enter(now, "", 1)
				if v.Blocked {
					continue
				}
				n := inFlight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				inFlight.Add(-1)
				tok.Exit(now, false)
			}
		}()
	}
	for i := range 200 {
		r.Line = i // a moved rule is the same rule
		nf := limiter.Compile(defaulted(r), f, limiter.Options{})
		f = nf
		cur.Store(f.Checker("r", "default"))
	}
	stop.Store(true)
	wg.Wait()
	if p := peak.Load(); p > 5 {
		t.Errorf("%d in flight across reloads, limit 5", p)
	}
	if tok, v := cur.Load().Enter(t0, "", 5); v.Blocked {
		t.Errorf("in-flight count leaked across reloads: 5 no longer fit")
	} else {
		tok.Exit(t0, false)
	}
}

// While Redis fails, a global rule's local fallback is this gateway's share
// of the count, count / the gateways last seen live (never below one call a
// second), so the fleet still passes about count; an avgLocal count is each
// gateway's already; without fallback the call passes.
func TestClusterFallbackShare(t *testing.T) {
	no := false
	tests := []struct {
		name     string
		behavior config.ControlBehavior
		tt       config.ThresholdType
		fallback *bool
		count    float64
		gateways int
		passes   int // of 20 calls 1ms apart
	}{
		{"global, 2 gateways", config.BehaviorReject, config.ThresholdGlobal, nil, 10, 2, 5},
		{"global, 3 gateways: floor(10/3)", config.BehaviorReject, config.ThresholdGlobal, nil, 10, 3, 3},
		{"global, never seen Redis: the whole count", config.BehaviorReject, config.ThresholdGlobal, nil, 10, 0, 10},
		{"global, more gateways than count: one each", config.BehaviorReject, config.ThresholdGlobal, nil, 4, 10, 1},
		{"global warmUp, 2 gateways", config.BehaviorWarmUp, config.ThresholdGlobal, nil, 10, 2, 1},
		{"global throttle, 2 gateways: spaced 200ms, queued up to 1s", config.BehaviorThrottle, config.ThresholdGlobal, nil, 10, 2, 6},
		{"avgLocal, 2 gateways: count as is", config.BehaviorReject, config.ThresholdAvgLocal, nil, 10, 2, 10},
		{"global, no fallback: pass", config.BehaviorReject, config.ThresholdGlobal, &no, 10, 2, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := qps("r", tt.count)
			r.ControlBehavior = tt.behavior
			r.ColdFactor, r.WarmUpPeriodSec, r.MaxQueueingTimeMs = 3, 10, 1000
			r.ClusterMode = true
			r.ClusterConfig = config.ClusterConfig{ThresholdType: tt.tt, FallbackToLocalWhenFail: tt.fallback}
			svc := &fakeCluster{err: errors.New("redis down"), gateways: tt.gateways}
			f := limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: svc})
			c := f.Checker("r", "default")
			got := 0
			for i := range 20 {
				tok, v := c.Enter(t0+int64(i)*ms, "", 1)
				if !v.Blocked {
					got++
				}
				tok.Exit(t0, false)
			}
			if got != tt.passes {
				t.Errorf("passed %d of 20 at once, want %d", got, tt.passes)
			}
		})
	}
}

// EnterQuotas writes its Token over whatever the destination held (the
// gateway reuses one in a pooled exchange): a pass into a Token an earlier
// call ended holds only its own slot, and a block leaves the zero Token.
// Were the stale holds kept, the second Exit would free two slots of a
// concurrency rule of one and let two calls in at once.
func TestEnterQuotasOverwritesItsToken(t *testing.T) {
	conc := config.FlowRule{Resource: "r", LimitApp: "default", Grade: config.GradeConcurrency, Count: 1}
	c := compile(t, conc).Checker("r", "default")
	var tok limiter.Token
	for i := range 5 {
		if v := c.EnterQuotas(&tok, t0, "", 1, -1, nil); v.Blocked {
			t.Fatalf("call %d blocked with nothing in flight", i)
		}
		var other limiter.Token
		if v := c.EnterQuotas(&other, t0, "", 1, -1, nil); !v.Blocked || !reflect.ValueOf(other).IsZero() {
			t.Fatalf("call %d: a second call in flight got %+v, token %+v; want blocked and the zero Token", i, v, other)
		}
		tok.Exit(t0, false)
	}
	held := tok // ended: its holds are spent
	if v := c.EnterQuotas(&held, t0, "", 1, -1, nil); v.Blocked {
		t.Fatal("blocked with nothing in flight")
	}
	if v := c.EnterPending(&tok, t0, "", 1, nil); !v.Blocked || !reflect.ValueOf(tok).IsZero() {
		t.Fatalf("a pending call with one in flight got %+v, token %+v; want blocked and the zero Token", v, tok)
	}
	held.Exit(t0, false)
	for i := range 2 {
		var a, b limiter.Token
		va := c.EnterQuotas(&a, t0, "", 1, -1, nil)
		vb := c.EnterQuotas(&b, t0, "", 1, -1, nil)
		if va.Blocked || !vb.Blocked {
			t.Fatalf("round %d: two calls at once: %v, %v; want one in", i, va.Blocked, vb.Blocked)
		}
		a.Exit(t0, false)
	}
}

// A call of more tokens than a global cluster rule's window holds never
// passes, as with a local rule: the block names no moment (RetryAfter -1,
// no Retry-After) and Redis is not asked. Redis told it to come back in a
// second, over and over (the cluster audit of 2026-12-07). An avgLocal
// window grows with the fleet, so it is asked.
func TestClusterCallOverTheWindowNeverPasses(t *testing.T) {
	for _, c := range []struct {
		tt     config.ThresholdType
		count  float64
		n      int64
		asked  bool
		reason string
	}{
		{config.ThresholdGlobal, 10, 12, false, "12 of a window of 10"},
		{config.ThresholdGlobal, 10.9, 11, false, "11 of a window of 10 whole calls"},
		{config.ThresholdGlobal, 10, 10, true, "the whole window"},
		{config.ThresholdAvgLocal, 10, 12, true, "avgLocal: 10 a gateway"},
	} {
		r := qps("r", c.count)
		r.ClusterMode = true
		r.ClusterConfig.ThresholdType = c.tt
		svc := &fakeCluster{ok: false, retry: time.Second}
		f := limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: svc})
		_, v := f.Checker("r", "default").Enter(t0, "", c.n)
		if !v.Blocked || len(svc.keys) > 0 != c.asked {
			t.Errorf("%s: blocked %v, Redis asked %v, want blocked, asked %v", c.reason, v.Blocked, len(svc.keys) > 0, c.asked)
		}
		if want := map[bool]time.Duration{true: time.Second, false: -1}[c.asked]; v.RetryAfter != want || v.HasQuota == (want < 0) {
			t.Errorf("%s: RetryAfter %v (quota %v), want %v", c.reason, v.RetryAfter, v.HasQuota, want)
		}
	}
	// Swept: counts 0.5 to 100,000 (whole, fractional, under one) over
	// statIntervalMs 100 ms to a minute, the window as the Redis script
	// counts it (window.ClusterWholeCalls: whole calls, and one call over
	// a wider window under one): its whole window is asked of Redis, one
	// token more never is.
	for _, count := range []float64{0.5, 0.9, 1, 1.5, 2, 3, 9.99, 10, 100, 1024, 2047.5, 4096, 99999.9, 100000} {
		for _, ms := range []int64{100, 1000, 60000} {
			_, holds := window.ClusterWholeCalls(count, ms*int64(time.Millisecond))
			for _, n := range []int64{int64(holds), int64(holds) + 1} {
				r := qps("r", count)
				r.StatIntervalMs, r.ClusterMode = ms, true
				svc := &fakeCluster{ok: false, retry: time.Second}
				f := limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: svc})
				f.Checker("r", "default").Enter(t0, "", n)
				if asked := len(svc.keys) > 0; asked != (n <= int64(holds)) {
					t.Errorf("count %v per %d ms, %d tokens of a window of %v: Redis asked %v", count, ms, n, holds, asked)
				}
			}
		}
	}
}
