package limiter_test

import (
	"fmt"
	"testing"

	"sluice/limiter"
)

// TestDryRunPrioritizedMatchesEnforced: on a prioritized call a dryRun qps
// reject rule decides as the same rule enforced would, so its would-be
// blocks are exactly the enforced rule's refusals. A call that finds the
// window full but room within occupyTimeout waits when enforced, which is
// no block; only a call with no room within the timeout is. The same call
// sequence (one plain call in four) runs on synthetic time once against
// the enforced rule and once against it dryRun, through EnterPrioritized,
// through EnterPending + Reserve (the gateway's path, beside an API group's
// rule that never refuses) and with the dryRun rule decided by
// DecideDryRun before Reserve (as the gateway reports it), swept over
// counts, overloads, start phases, timeouts and acquireCount. The dryRun
// run never refuses or delays a call.
func TestDryRunPrioritizedMatchesEnforced(t *testing.T) {
	for _, count := range []float64{1, 2, 3, 7, 20, 100} {
		for _, over := range []float64{1.2, 1.5, 3, 10} {
			if count*over > 150 { // a few seconds under -race
				continue
			}
			t.Run(fmt.Sprintf("count=%g/over=%gx", count, over), func(t *testing.T) {
				t.Parallel()
				phases := []int64{613*ms + 7}
				for ph := int64(0); ph < sec; ph += 5 * sweepStep {
					phases = append(phases, ph)
				}
				waits, ns := []int64{0, 100 * ms, 500 * ms, sec, 1500 * ms}, []int64{1, 2}
				if count >= 100 {
					waits, ns = []int64{0, 500 * ms, 1500 * ms}, []int64{1}
				}
				for _, ph := range phases {
					for _, wait := range waits {
						for _, n := range ns {
							if n > int64(count) {
								continue
							}
							for _, path := range []prioPath{prioEnter, prioReserve, prioDecide} {
								checkDryPrioritized(t, count, over, wait, t0-t0%sec+ph, n, path)
							}
						}
					}
				}
			})
		}
	}
}

// prioPath is how checkDryPrioritized enters a prioritized call.
type prioPath int

const (
	prioEnter   prioPath = iota // EnterPrioritized
	prioReserve                 // EnterPending on two checkers, then Reserve
	prioDecide                  // the same, with DecideDryRun after EnterPending
)

func checkDryPrioritized(t *testing.T, count, over float64, maxWait, start, n int64, path prioPath) {
	t.Helper()
	run := func(dry bool) []bool {
		r := qps("r", count)
		r.DryRun = dry
		f := compile(t, r, qps("g", 1e9))
		route, group := f.Checker("r", "default"), f.Checker("g", "default")
		call := func(now int64, plain bool) (bool, limiter.Verdict) {
			if plain {
				tok, v := route.Enter(now, "", n)
				tok.Exit(now, false)
				return v.Blocked || v.DryRun > 0, v
			}
			if path == prioEnter {
				tok, v := route.EnterPrioritized(now, "", n, maxWait)
				tok.Exit(now+int64(v.Wait), false)
				return v.Blocked || v.DryRun > 0, v
			}
			var rt, gt limiter.Token
			v := route.EnterPending(&rt, now, "", n, nil)
			group.EnterPending(&gt, now, "", n, nil)
			decided := 0
			if path == prioDecide {
				decided = rt.DecideDryRun(now, maxWait) + gt.DecideDryRun(now, maxWait)
			}
			var rv limiter.Verdict
			if ok, _ := limiter.Reserve(now, maxWait, []*limiter.Token{&rt, &gt}, &rv); !ok {
				rt.Cancel(now, limiter.ReasonFlow)
				gt.Cancel(now, limiter.ReasonFlow)
				return true, limiter.Verdict{Blocked: true}
			}
			if path == prioDecide && rv.DryRun != 0 {
				t.Fatalf("Reserve counted again %d would-be blocks DecideDryRun had decided", rv.DryRun)
			}
			rt.Exit(now+int64(rv.Wait), false)
			gt.Exit(now+int64(rv.Wait), false)
			rv.DryRun += v.DryRun + decided
			return rv.DryRun > 0, rv
		}
		var out []bool
		step := float64(sec) / (count * over / float64(n))
		for i := int64(0); ; i++ {
			now := start + int64(float64(i)*step+0.999999)
			if now >= start+4*sec {
				return out
			}
			refused, v := call(now, i%4 == 3)
			if dry && (v.Blocked || v.Wait != 0 || v.Prioritized) {
				t.Fatalf("call %d: a dryRun rule refused or delayed it: %+v", i, v)
			}
			out = append(out, refused)
		}
	}
	enforced, dry := run(false), run(true)
	refusals, would := 0, 0
	for i := range enforced {
		if enforced[i] {
			refusals++
		}
		if dry[i] {
			would++
		}
	}
	for i := range enforced {
		if enforced[i] != dry[i] {
			t.Fatalf("count %g, %gx, n %d, wait %dms, phase %dms, path %d: call %d refused %v enforced, would-be block %v dryRun (%d refusals, %d would-be blocks)",
				count, over, n, maxWait/ms, (start%sec)/ms, path, i, enforced[i], dry[i], refusals, would)
		}
	}
	if refusals == 0 && over >= 3 {
		t.Fatalf("count %g, %gx, wait %dms: nothing refused: the sweep tests nothing", count, over, maxWait/ms)
	}
}

// A prioritized call through a dryRun rule allocates nothing either, the
// rule decided by EnterPrioritized, by Reserve or by DecideDryRun, its
// pass reserved ahead or a would-be block.
func TestDryRunPrioritizedAllocatesNothing(t *testing.T) {
	dry := qps("r", 3)
	dry.DryRun = true
	f := compile(t, dry, qps("g", 1e9))
	r, g := f.Checker("r", "default"), f.Checker("g", "default")
	now := t0
	held := new([2]limiter.Token)
	ts := []*limiter.Token{&held[0], &held[1]}
	would, i := 0, 0
	allocs := testing.AllocsPerRun(1000, func() {
		now += 50 * ms // 20 a second against 3: some reserved ahead, some would-be blocks
		tok, v := r.EnterPrioritized(now, "", 1, 200*ms)
		tok.Exit(now, false)
		would += v.DryRun
		r.EnterPending(&held[0], now, "", 1, nil)
		g.EnterPending(&held[1], now, "", 1, nil)
		if i++; i%2 == 0 {
			would += held[0].DecideDryRun(now, 200*ms)
		}
		var rv limiter.Verdict
		limiter.Reserve(now, 200*ms, ts, &rv)
		would += rv.DryRun
		held[0].Exit(now, false)
		held[1].Exit(now, false)
	})
	if allocs > 0 {
		t.Errorf("a prioritized call through a dryRun rule allocates %v per call", allocs)
	}
	if would == 0 {
		t.Error("no would-be block: the test tests less than it says")
	}
}
