package limiter_test

import (
	"fmt"
	"testing"
	"time"

	"sluice/internal/passcheck"
	"sluice/limiter"
)

// A prioritized call counted by two checkers (its route's and an API
// group's) waits for the first moment at which both have room, and holds
// that pass in both: the route has room now, the group only when its
// oldest pass leaves; a call that no moment within its timeout fits is
// refused with the time until one would, reserving nothing; one that leaves
// gives its passes back in both.
func TestReserveAcrossCheckers(t *testing.T) {
	f := compile(t, qps("route", 5), qps("group", 2))
	route, group := f.Checker("route", "default"), f.Checker("group", "default")
	for _, at := range []int64{t0, t0 + 300*ms} { // other routes of the group
		tok, v := group.Enter(at, "", 1)
		if v.Blocked {
			t.Fatalf("plain group call at +%dms refused", (at-t0)/ms)
		}
		tok.Exit(at, false)
	}
	enter := func(now, maxWait int64) (rt, gt limiter.Token, v limiter.Verdict, ok bool) {
		t.Helper()
		var v1, v2 limiter.Verdict
		v1 = route.EnterPending(&rt, now, "", 1, nil)
		v2 = group.EnterPending(&gt, now, "", 1, nil)
		if v1.Blocked || v2.Blocked {
			t.Fatalf("EnterPending blocked: %+v %+v", v1, v2)
		}
		ok, retry := limiter.Reserve(now, maxWait, []*limiter.Token{&rt, &gt}, &v)
		if !ok {
			rt.Cancel(now, limiter.ReasonFlow)
			gt.Cancel(now, limiter.ReasonFlow)
			v.RetryAfter = time.Duration(retry)
		}
		return rt, gt, v, ok
	}
	now := t0 + 500*ms
	a, ag, v, ok := enter(now, sec)
	if !ok || !v.Prioritized || v.Wait != 500*time.Millisecond {
		t.Fatalf("first: ok=%v %+v, want a wait of 500 ms (the group's pass at t0 leaves at +1 s)", ok, v)
	}
	_, _, v, ok = enter(now, 200*ms)
	if ok || v.RetryAfter != 800*time.Millisecond {
		t.Fatalf("a 200 ms timeout: ok=%v %+v, want refused, retry in 800 ms (+1.3 s, when +300 ms leaves)", ok, v)
	}
	b, bg, v, ok := enter(now, sec)
	if !ok || v.Wait != 800*time.Millisecond {
		t.Fatalf("second: ok=%v %+v, want 800 ms", ok, v)
	}
	// The route alone had room all along: its window holds the two
	// reserved passes only, so a plain route call passes now.
	if tok, v := route.Enter(now, "", 1); v.Blocked {
		t.Fatalf("a plain route call: %+v, want a pass", v)
	} else {
		tok.Exit(now, false)
	}
	a.Cancel(now+100*ms, limiter.ReasonNone) // left while waiting
	ag.Cancel(now+100*ms, limiter.ReasonNone)
	if _, _, v, ok := enter(now+200*ms, sec); !ok || v.Wait != 300*time.Millisecond {
		t.Fatalf("after the first left: ok=%v %+v, want its slot at +1 s (300 ms)", ok, v)
	}
	b.Exit(now+800*ms, false)
	bg.Exit(now+800*ms, false)
}

// TestReserveAcrossCheckersProperty drives a route's qps reject rule and
// an API group's (which also takes plain calls of the group's other
// routes, one call in three) with prioritized calls reserved in both at
// once, on synthetic time, swept over both counts, start phases and
// timeouts; every fifth waiter leaves halfway. No real interval of either
// window passes more than its count, every wait is within the timeout, and
// a call is refused only when no moment within its timeout has room in
// every window it needs, as a model of the passes judges.
func TestReserveAcrossCheckersProperty(t *testing.T) {
	for _, counts := range [][2]float64{{1, 1}, {2, 5}, {5, 2}, {3, 3}, {7, 4}, {20, 50}} {
		t.Run(fmt.Sprintf("route=%g/group=%g", counts[0], counts[1]), func(t *testing.T) {
			t.Parallel()
			for ph := int64(0); ph < sec; ph += 3 * sweepStep {
				for _, wait := range []int64{100 * ms, 600 * ms, 1500 * ms} {
					checkTogether(t, counts[0], counts[1], wait, t0-t0%sec+ph)
				}
			}
		})
	}
}

func checkTogether(t *testing.T, cr, cg float64, maxWait, start int64) {
	t.Helper()
	f := compile(t, qps("route", cr), qps("group", cg))
	route, group := f.Checker("route", "default"), f.Checker("group", "default")
	mr := &passModel{iv: sec, limit: int64(cr)}
	mg := &passModel{iv: sec, limit: int64(cg)}
	// bothRoom: a moment in [now, until] at which both windows fit one
	// more (now, or a pass's time or its leaving in either).
	bothRoom := func(now, until int64) bool {
		cands := []int64{now}
		for _, m := range []*passModel{mr, mg} {
			for _, p := range m.at {
				cands = append(cands, p, p+sec)
			}
		}
		for _, c := range cands {
			if c >= now && c <= until && mr.fits(c) && mg.fits(c) {
				return true
			}
		}
		return false
	}
	var leaving waiters
	step := float64(sec) / (max(cr, cg) * 3)
	end := start + 4*sec
	desc := fmt.Sprintf("route %g, group %g, wait %dms, phase %dms", cr, cg, maxWait/ms, (start%sec)/ms)
	waits := 0
	for i := int64(0); ; i++ {
		now := start + int64(float64(i)*step+0.999999)
		if now >= end {
			break
		}
		leaving.leaveBy(now, mr, mg)
		if i%3 == 2 { // a plain call of another route of the group
			tok, v := group.Enter(now, "", 1)
			if v.Blocked {
				if mg.fits(now) {
					t.Fatalf("%s: plain group call %d at +%dms refused with room", desc, i, (now-start)/ms)
				}
				continue
			}
			mg.add(now)
			tok.Exit(now, false)
			continue
		}
		var rt, gt limiter.Token
		route.EnterPending(&rt, now, "", 1, nil)
		group.EnterPending(&gt, now, "", 1, nil)
		var v limiter.Verdict
		if ok, _ := limiter.Reserve(now, maxWait, []*limiter.Token{&rt, &gt}, &v); !ok {
			rt.Cancel(now, limiter.ReasonFlow)
			gt.Cancel(now, limiter.ReasonFlow)
			if bothRoom(now, now+min(maxWait, sec)) {
				t.Fatalf("%s: call %d at +%dms refused with room in both within its timeout", desc, i, (now-start)/ms)
			}
			continue
		}
		wait := int64(v.Wait)
		if wait > min(maxWait, sec) || v.Prioritized != (wait > 0) {
			t.Fatalf("%s: call %d: wait %dns (prioritized %v)", desc, i, wait, v.Prioritized)
		}
		at := now + wait
		mr.add(at)
		mg.add(at)
		if wait > 0 {
			if waits++; waits%5 == 0 {
				leaving.add(waiter{leave: now + wait/2, at: at, toks: []limiter.Token{rt, gt}})
				continue
			}
		}
		rt.Exit(at, false)
		gt.Exit(at, false)
	}
	if got := passcheck.MostInInterval(mr.at, sec); got > int(cr) {
		t.Fatalf("%s: a real interval of the route held %d passes", desc, got)
	}
	if got := passcheck.MostInInterval(mg.at, sec); got > int(cg) {
		t.Fatalf("%s: a real interval of the group held %d passes", desc, got)
	}
	if waits == 0 && maxWait >= sec {
		t.Fatalf("%s: no call waited", desc)
	}
}
