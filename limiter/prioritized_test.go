package limiter_test

import (
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter"
)

// A prioritized call under two reject rules waits for the first moment at
// which both have room; one that leaves gives its pass back in both; a
// call that a concurrency rule blocks does not wait.
func TestPrioritizedSeveralRules(t *testing.T) {
	perSec := qps("r", 2)
	perTwo := qps("r", 3)
	perTwo.StatIntervalMs = 2000
	c := compile(t, perSec, perTwo).Checker("r", "default")
	for _, at := range []int64{t0, t0 + 100*ms, t0 + 1100*ms} {
		if !enterExit(c, at, 1) {
			t.Fatalf("plain call at +%dms refused", (at-t0)/ms)
		}
	}
	// at +1.2 s the 1 s rule holds +1.1 s only (room); the 2 s rule holds
	// 3 until t0 leaves at +2 s.
	now := t0 + 1200*ms
	if _, v := c.Enter(now, "", 1); !v.Blocked {
		t.Fatal("a plain call passed a full 2 s window")
	}
	if _, v := c.EnterPrioritized(now, "", 1, int64(500*time.Millisecond)); !v.Blocked {
		t.Fatal("a prioritized call waited beyond its 500 ms")
	}
	tok, v := c.EnterPrioritized(now, "", 1, int64(time.Second))
	if v.Blocked || !v.Prioritized || v.Wait != 800*time.Millisecond {
		t.Fatalf("prioritized: %+v, want a wait of 800 ms (both rules have room at +2 s)", v)
	}
	// the next one: the 1 s rule has +1.1 and +2.0 until +2.1 s; the 2 s
	// rule frees t0+100ms at +2.1 s: both at +2.1 s
	tok2, v2 := c.EnterPrioritized(now, "", 1, int64(time.Second))
	if v2.Blocked || v2.Wait != 900*time.Millisecond {
		t.Fatalf("second prioritized: %+v, want 900 ms", v2)
	}
	tok.Cancel(now+100*ms, limiter.ReasonNone) // left while waiting
	// its slot, +2 s, is before the second waiter's: a gap the next one takes
	_, v3 := c.EnterPrioritized(now+200*ms, "", 1, int64(time.Second))
	if v3.Blocked || v3.Wait != 600*time.Millisecond {
		t.Fatalf("after the first left: %+v, want its slot at +2 s (600 ms)", v3)
	}
	tok2.Exit(t0+2100*ms, false)

	conc := config.FlowRule{Resource: "k", LimitApp: "default", Grade: config.GradeConcurrency, Count: 1}
	k := compile(t, conc, qps("k", 1)).Checker("k", "default")
	held, _ := k.EnterPrioritized(t0, "", 1, int64(time.Second))
	if _, v := k.EnterPrioritized(t0, "", 1, int64(time.Second)); !v.Blocked || v.Prioritized {
		t.Fatalf("a call the concurrency rule blocks: %+v, want blocked at once", v)
	}
	held.Exit(t0, false)
}

// Calls read the clock before they reach the window, so one may arrive
// with a reading older than a call already counted. Its pass is stamped at
// that present, a hair after its own now: it goes at once like a plain
// call and is no prioritized wait (sluice_prioritized_waits_total counted
// such a call as one, under a busy machine).
func TestPrioritizedStaleClockIsNoWait(t *testing.T) {
	c := compile(t, qps("r", 5)).Checker("r", "default")
	if tok, v := c.EnterPrioritized(t0+10*ms, "", 1, int64(time.Second)); v.Blocked || v.Prioritized || v.Wait != 0 {
		t.Fatalf("first call: %+v, want a pass at once", v)
	} else {
		tok.Exit(t0+10*ms, false)
	}
	tok, v := c.EnterPrioritized(t0, "", 1, int64(time.Second)) // read 10 ms before the first
	if v.Blocked || v.Prioritized || v.Wait != 0 {
		t.Fatalf("a call with an older clock reading: %+v, want a pass at once, no wait", v)
	}
	tok.Exit(t0+10*ms, false)
	for i := range 3 {
		if _, v := c.EnterPrioritized(t0+5*ms, "", 1, int64(time.Second)); v.Blocked || v.Prioritized {
			t.Fatalf("call %d of 5: %+v", i+3, v)
		}
	}
	// the window is full (all five stamped at +10 ms): the 6th waits
	// for them to leave, a real wait
	_, v = c.EnterPrioritized(t0+10*ms, "", 1, int64(time.Second))
	if v.Blocked || !v.Prioritized || v.Wait != time.Second {
		t.Fatalf("6th call: %+v, want a wait of 1 s", v)
	}
}

// A burst of prioritized calls all read the clock at once, before the
// first of them reaches the window: the later ones see passes stamped
// after their own now. occupyTimeout bounds the wait from the present the
// window has seen, not from that stale reading, so each waiter of a full
// window gets the slot of a pass one interval on, exactly occupyTimeout
// away at most, and none is refused (e2e TestPrioritizedCalls refused the
// last of a burst of 8 on an API group's count 4).
func TestPrioritizedBurstWithStaleClocks(t *testing.T) {
	const count = 4
	for _, together := range []bool{false, true} {
		t.Run(map[bool]string{false: "one checker", true: "route and API group"}[together], func(t *testing.T) {
			f := compile(t, qps("route", 100), qps("group", count))
			route, group := f.Checker("route", "default"), f.Checker("group", "default")
			enter := func(now int64) limiter.Verdict {
				t.Helper()
				if !together {
					_, v := group.EnterPrioritized(now, "", 1, sec)
					return v
				}
				var rt, gt limiter.Token
				route.EnterPending(&rt, now, "", 1, nil)
				group.EnterPending(&gt, now, "", 1, nil)
				var v limiter.Verdict
				if ok, _ := limiter.Reserve(now, sec, []*limiter.Token{&rt, &gt}, &v); !ok {
					rt.Cancel(now, limiter.ReasonFlow)
					gt.Cancel(now, limiter.ReasonFlow)
					v.Blocked = true
				}
				return v
			}
			// the first count pass at once, in the order they reach the
			// window, 1 ms apart
			for i := range int64(count) {
				if v := enter(t0 + (i+1)*ms); v.Blocked || v.Wait != 0 {
					t.Fatalf("call %d: %+v, want a pass at once", i+1, v)
				}
			}
			// the rest read the clock at t0, before any of those: each
			// waits for the pass it follows to leave, measured from +4 ms
			for i := range int64(count) {
				v := enter(t0)
				want := time.Duration((i+1)*ms + sec - count*ms)
				if v.Blocked || !v.Prioritized || v.Wait != want {
					t.Fatalf("waiter %d with a stale clock: %+v, want a wait of %v", i+1, v, want)
				}
			}
			if v := enter(t0 + count*ms); !v.Blocked {
				t.Fatalf("one more: %+v, want refused (the window is full for 1 s)", v)
			}
		})
	}
}
