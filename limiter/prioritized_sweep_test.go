package limiter_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"sluice/config"
	"sluice/internal/passcheck"
	"sluice/limiter"
)

// TestPrioritizedSeveralRulesProperty: a prioritized call under
// several qps reject rules (all callers per 1 s, its origin per 1 s, all
// callers per 10 s) with acquireCount 1 and 3, origins "a", "b" and none,
// overloads, every fifth waiter leaving halfway: no real interval of any
// rule passes more than its count.
func TestPrioritizedSeveralRulesProperty(t *testing.T) {
	for _, n := range []int64{1, 3} {
		for _, over := range []float64{1.5, 4} {
			for _, ph := range []int64{0, 137 * ms, 611 * ms} {
				t.Run(fmt.Sprintf("n=%d/over=%g/ph=%d", n, over, ph/ms), func(t *testing.T) {
					all := qps("r", 9)
					perA := qps("r", 4)
					perA.LimitApp = "a"
					long := qps("r", 30)
					long.StatIntervalMs = 10000
					other := qps("r", 5)
					other.LimitApp = "other"
					c := compile(t, all, perA, long, other).Checker("r", "default")
					var pAll, pA, pLong []int64
					pOther := map[string][]int64{}
					start := t0 + ph
					end := start + 25*sec
					step := float64(sec) / (9 * over / float64(n))
					origins := []string{"a", "b", "", "a", "c"}
					type leaver struct {
						leave int64
						tok   limiter.Token
					}
					var leaving []leaver
					waits := 0
					for i := int64(0); ; i++ {
						now := start + int64(float64(i)*step)
						if now >= end {
							break
						}
						for len(leaving) > 0 && leaving[0].leave <= now {
							leaving[0].tok.Cancel(leaving[0].leave, limiter.ReasonNone)
							leaving = leaving[1:]
						}
						o := origins[i%int64(len(origins))]
						tok, v := c.EnterPrioritized(now, o, n, 800*ms)
						if v.Blocked {
							continue
						}
						at := now + int64(v.Wait)
						if v.Wait > 0 {
							waits++
							if waits%5 == 0 {
								leaving = append(leaving, leaver{now + int64(v.Wait)/2, tok})
								continue
							}
						}
						for k := int64(0); k < n; k++ {
							pAll = append(pAll, at)
							pLong = append(pLong, at)
							if o == "a" {
								pA = append(pA, at)
							}
							if o == "b" || o == "c" {
								pOther[o] = append(pOther[o], at)
							}
						}
						tok.Exit(at, false)
					}
					check := func(name string, p []int64, iv int64, count int) {
						slices.Sort(p)
						if got := passcheck.MostInInterval(p, iv); got > count {
							t.Errorf("%s: an interval of %d ms holds %d, count %d", name, iv/ms, got, count)
						}
					}
					check("all", pAll, sec, 9)
					check("a", pA, sec, 4)
					check("long", pLong, 10*sec, 30)
					for o, p := range pOther {
						check("other "+o, p, sec, 5)
					}
					if waits == 0 {
						t.Errorf("no call waited")
					}
				})
			}
		}
	}
}

var _ = config.GradeQPS

// TestPrioritizedIntervalsProperty: prioritized calls against one qps
// reject rule over statIntervalMs 100 ms, 1 s and 60 s, counts under one
// call an interval and above, acquireCount 1 and 3: no real window of the
// rule's passes holds more than it allows, and no wait exceeds the timeout.
func TestPrioritizedIntervalsProperty(t *testing.T) {
	for _, iv := range []int64{100, 1000, 60000} {
		for _, count := range []float64{0.5, 1, 2.5, 7, 150} {
			if count > prioMaxCount {
				continue // under -race; CI runs it whole without (.ci/run)
			}
			for _, n := range []int64{1, 3} {
				for _, occ := range []int64{1, 50, 700, 60000} {
					r := qps("r", count)
					r.StatIntervalMs = iv
					c := compile(t, r).Checker("r", "default")
					ivNs := iv * ms
					// The window of a count under one call: whole intervals holding one.
					win, lim := ivNs, int(count)
					if count < 1 {
						m := int64(1 / count)
						if float64(m)*count < 1 {
							m++
						}
						win, lim = m*ivNs, 1
					}
					var passes []int64
					step := float64(ivNs) / (max(count, 1) * 2.5 / float64(n))
					start := t0 + 77*ms
					end := start + 12*win
					k := 0
					type leaver struct {
						leave int64
						tok   limiter.Token
					}
					var leaving []leaver
					for i := int64(0); ; i++ {
						now := start + int64(float64(i)*step)
						if now >= end {
							break
						}
						for len(leaving) > 0 && leaving[0].leave <= now {
							leaving[0].tok.Cancel(leaving[0].leave, limiter.ReasonNone)
							leaving = leaving[1:]
						}
						tok, v := c.EnterPrioritized(now, "", n, occ*ms)
						if v.Blocked {
							continue
						}
						if int64(v.Wait) > occ*ms {
							t.Fatalf("iv %d count %g n %d occ %d: wait %v", iv, count, n, occ, v.Wait)
						}
						at := now + int64(v.Wait)
						k++
						if k%7 == 0 && v.Wait > 0 {
							// leaves a third into its wait (leave times grow with now:
							// every wait is at most one interval)
							l := now + int64(v.Wait)/3
							j := len(leaving)
							for j > 0 && leaving[j-1].leave > l {
								j--
							}
							leaving = append(leaving, leaver{})
							copy(leaving[j+1:], leaving[j:])
							leaving[j] = leaver{l, tok}
							continue
						}
						for j := int64(0); j < n; j++ {
							passes = append(passes, at)
						}
						tok.Exit(at, false)
					}
					slices.Sort(passes)
					if got := passcheck.MostInInterval(passes, win); got > lim {
						t.Errorf("iv %d count %g n %d occ %d: %d in a window of %d ms, limit %d", iv, count, n, occ, got, win/ms, lim)
					}
				}
			}
		}
	}
}

// quotaRecorder collects the quotas a check hands over.
type quotaRecorder struct{ qs []limiter.Quota }

func (s *quotaRecorder) Quota(q limiter.Quota) { s.qs = append(s.qs, q) }

// TestPrioritizedRefusalHasQuota: a prioritized call refused because
// no moment within its timeout has room is a flow block like a plain one:
// its verdict has the blocking qps rule's quota (none left, free when its
// room comes), and the sink gets that quota last, so that the 429 carries
// the RateLimit fields of the rule that refused it (docs/rules.md,
// Combining rules). Both ways in: EnterQuotas with a wait, and
// EnterPending + Reserve (a route and its API group).
func TestPrioritizedRefusalHasQuota(t *testing.T) {
	check := func(name string, v limiter.Verdict, s *quotaRecorder, policy string, reset time.Duration) {
		t.Helper()
		if !v.Blocked {
			t.Fatalf("%s: passed, want refused", name)
		}
		want := limiter.Quota{Policy: policy, Kind: limiter.ReasonFlow, Limit: 1, Window: time.Second, Remaining: 0, Reset: reset}
		if !v.HasQuota || v.Quota != want {
			t.Errorf("%s: verdict quota %v %+v, want %+v", name, v.HasQuota, v.Quota, want)
		}
		if len(s.qs) == 0 || s.qs[len(s.qs)-1] != want {
			t.Errorf("%s: sink got %+v, want %+v last", name, s.qs, want)
		}
	}
	f := compile(t, qps("route", 1), qps("group", 1))
	route, group := f.Checker("route", "default"), f.Checker("group", "default")
	tok, _ := route.Enter(t0, "", 1)
	tok.Exit(t0, false)
	s := &quotaRecorder{}
	v := route.EnterQuotas(new(limiter.Token), t0+300*ms, "", 1, 100*ms, s)
	check("EnterQuotas", v, s, "route", 700*time.Millisecond)

	f = compile(t, qps("route", 1), qps("group", 1)) // the route has room: the group refuses
	route, group = f.Checker("route", "default"), f.Checker("group", "default")
	tok, _ = group.Enter(t0, "", 1)
	tok.Exit(t0, false)
	s = &quotaRecorder{}
	var rt, gt limiter.Token
	route.EnterPending(&rt, t0+400*ms, "", 1, s)
	group.EnterPending(&gt, t0+400*ms, "", 1, s)
	var rv limiter.Verdict
	ok, retry := limiter.Reserve(t0+400*ms, 100*ms, []*limiter.Token{&rt, &gt}, &rv)
	if ok {
		t.Fatalf("Reserve passed, want refused")
	}
	rv.Blocked = true
	check("Reserve", rv, s, "group", time.Duration(retry))
	rt.Cancel(t0+400*ms, limiter.ReasonFlow)
	gt.Cancel(t0+400*ms, limiter.ReasonFlow)
}

// TestPrioritizedWithThrottle: a prioritized call under a throttle
// rule (all callers) and a qps reject rule (its origin) waits for the later
// of its queue slot and its reserved pass; refused by the reject rule, it
// gives its queue slot back, so the next caller of the queue takes it.
func TestPrioritizedWithThrottle(t *testing.T) {
	th := qps("r", 10)
	th.ControlBehavior = config.BehaviorThrottle
	th.MaxQueueingTimeMs = 2000
	rj := qps("r", 2)
	rj.LimitApp = "a"
	c := compile(t, th, rj).Checker("r", "default")
	var waits []time.Duration
	for i := 0; i < 3; i++ {
		tok, v := c.EnterPrioritized(t0, "a", 1, sec)
		if v.Blocked {
			t.Fatalf("call %d refused: %+v", i, v)
		}
		waits = append(waits, v.Wait)
		defer tok.Exit(t0+int64(v.Wait), false)
	}
	// slots 0, 100, 200 ms; a pass is reserved no earlier than its call's
	// slot, so passes at 0 and 100 ms, then the third's at 1 s, when the
	// first leaves
	if waits[0] != 0 || waits[1] != 100*time.Millisecond || waits[2] != time.Second {
		t.Fatalf("waits %v, want [0s 100ms 1s]", waits)
	}
	// The fourth: its pass could come only at 1.1 s, past its 1 s: refused,
	// its queue slot (300 ms) given back.
	if _, v := c.EnterPrioritized(t0, "a", 1, sec); !v.Blocked {
		t.Fatalf("fourth passed: %+v", v)
	}
	tok, v := c.EnterPrioritized(t0, "b", 1, sec)
	if v.Blocked || v.Wait != 300*time.Millisecond {
		t.Fatalf("a caller of the queue alone: %+v, want the slot at 300 ms", v)
	}
	tok.Exit(t0, false)
}
