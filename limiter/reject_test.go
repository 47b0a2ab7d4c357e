package limiter_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"sluice/config"
	"sluice/internal/passcheck"
	"sluice/limiter"
)

// A steady 3x overload must never let a real interval pass more than
// count*1.1, the first interval included, and must still pass ~count per
// interval. Several start phases relative to the bucket grid are tried.
func TestRejectRealIntervalsBound(t *testing.T) {
	for _, count := range []float64{10, 100, 1000} {
		for _, phase := range []int64{0, 1, 7 * ms, 19*ms + 999, 333 * ms} {
			f := compile(t, qps("r", count))
			c := f.Checker("r", "default")
			start := t0 + phase
			passes := drive(c, start, 10*sec, 3*count, "", 1)
			got := passcheck.MostInInterval(passes, sec)
			if limit := int(count * 1.1); got > limit {
				t.Errorf("count %v phase %d: a real 1 s interval passed %d > %d", count, phase, got, limit)
			}
			if total, want := len(passes), int(10*count); total < want*95/100 || total > want*102/100 {
				t.Errorf("count %v phase %d: passed %d in 10 s, want about %d", count, phase, total, want)
			}
		}
	}
}

// A burst at one instant passes exactly floor(count/n) calls, and the window
// frees them one interval later, to the nanosecond.
func TestRejectExactAtOneInstant(t *testing.T) {
	tests := []struct {
		count float64
		n     int64
		want  int
	}{
		{10, 1, 10}, {100, 1, 100}, {1000, 1, 1000}, {10, 3, 3}, {10.5, 1, 10}, {1, 2, 0}, {0, 1, 0},
	}
	for _, tt := range tests {
		c := compile(t, qps("r", tt.count)).Checker("r", "default")
		burst := func(now int64) int {
			passed := 0
			for range int(tt.count)*2 + 5 {
				tok, v := c.Enter(now, "", tt.n)
				if !v.Blocked {
					passed++
					tok.Exit(now, false)
				} else if v.Reason != limiter.ReasonFlow {
					t.Fatalf("blocked with reason %v", v.Reason)
				}
			}
			return passed
		}
		if got := burst(t0); got != tt.want {
			t.Errorf("count %v n %d: burst passed %d, want %d", tt.count, tt.n, got, tt.want)
		}
		free := t0 + sec
		if got := burst(free - 1); got != 0 {
			t.Errorf("count %v n %d: 1 ns before the window ends passed %d more", tt.count, tt.n, got)
		}
		if got := burst(free); got != tt.want {
			t.Errorf("count %v n %d: next window passed %d, want %d", tt.count, tt.n, got, tt.want)
		}
	}
}

// statIntervalMs 60000 with count 100 is 100 a minute, in every real minute.
func TestRejectPerMinute(t *testing.T) {
	r := qps("r", 100)
	r.StatIntervalMs = 60000
	c := compile(t, r).Checker("r", "default")
	passes := drive(c, t0, 10*60*sec, 300.0/60, "", 1)
	if got := passcheck.MostInInterval(passes, 60*sec); got > 110 {
		t.Errorf("a real minute passed %d > 110", got)
	}
	if got := len(passes); got < 950 || got > 1010 {
		t.Errorf("10 minutes passed %d, want about 1000", got)
	}
}

// The Quota says what a RateLimit header needs: count, window, what is left
// and when the oldest pass leaves the window; a block says when to retry.
func TestRejectQuotaAndRetryAfter(t *testing.T) {
	c := compile(t, qps("r", 3)).Checker("r", "default")
	var last limiter.Verdict
	for i, at := range []int64{t0, t0 + 100*ms, t0 + 200*ms} {
		tok, v := c.Enter(at, "", 1)
		if v.Blocked || !v.HasQuota {
			t.Fatalf("call %d: %+v", i, v)
		}
		tok.Exit(at, false)
		if v.Quota.Remaining != float64(2-i) || v.Quota.Limit != 3 || v.Quota.Window != time.Second || v.Quota.Policy != "r" {
			t.Errorf("call %d: quota %+v", i, v.Quota)
		}
		last = v
	}
	// the pass at t0 leaves 1 s later
	if want := 800 * time.Millisecond; last.Quota.Reset != want {
		t.Errorf("Reset %v, want %v", last.Quota.Reset, want)
	}
	_, v := c.Enter(t0+300*ms, "", 1)
	if !v.Blocked || v.Quota.Remaining != 0 {
		t.Fatalf("4th call: %+v", v)
	}
	if want := 700 * time.Millisecond; v.RetryAfter != want || v.Quota.Reset != want {
		t.Errorf("RetryAfter %v, want %v", v.RetryAfter, want)
	}
	if _, v := c.Enter(t0+300*ms+int64(v.RetryAfter), "", 1); v.Blocked {
		t.Errorf("blocked at RetryAfter")
	}
}

// acquireCount n takes n tokens of the window.
func TestAcquireCount(t *testing.T) {
	c := compile(t, qps("r", 10)).Checker("r", "default")
	for i, want := range []bool{true, true, true, false} {
		_, v := c.Enter(t0, "", 3)
		if v.Blocked == want {
			t.Errorf("call %d of 3 tokens: blocked %v", i, v.Blocked)
		}
	}
	if _, v := c.Enter(t0, "", 1); v.Blocked || v.Quota.Remaining != 0 {
		t.Errorf("the 10th token: %+v", v)
	}
}

// A caller whose now is behind others' (another goroutine read the clock a
// little earlier, or a long-delayed call) never gets past the limit.
func TestRejectClockBehind(t *testing.T) {
	c := compile(t, qps("r", 5)).Checker("r", "default")
	steps := []struct {
		at   int64
		pass int
	}{
		{t0 + 900*ms, 5},
		{t0 + 899*ms, 0}, // a hair behind
		{t0, 0},          // most of a window behind
		{t0 - 5*sec, 0},  // so far behind its bucket was recycled
		{t0 + 2*sec, 5},
	}
	for i, s := range steps {
		got := 0
		for range 10 {
			if tok, v := c.Enter(s.at, "", 1); !v.Blocked {
				got++
				tok.Exit(s.at, false)
			}
		}
		if got != s.pass {
			t.Errorf("step %d: %d passed, want %d", i, got, s.pass)
		}
	}
}

// However heavy the overload and wherever the first call falls, no real
// interval passes more than count, and the limiter passes exactly count per
// interval where the offered calls of an interval are a whole number (so
// each pass is replaced by the call exactly one interval after it). The
// bucketed window before let 2x through at 100x overload, or kept a bucket
// one interval after its end and passed 50/51 of count.
func TestRejectNoRealIntervalAboveCount(t *testing.T) {
	tests := []struct {
		count, overload float64
		phase           int64
	}{
		{10, 3, 0},
		{10, 20, 10 * ms},
		{10, 100, 10 * ms},
		{10, 100, 20*ms - 1},
		{100, 50, 10 * ms},
		{1000, 10, 19 * ms},
	}
	for _, tt := range tests {
		c := compile(t, qps("r", tt.count)).Checker("r", "default")
		start := t0 - t0%(20*ms) + tt.phase
		passes := drive(c, start, 5*sec, tt.overload*tt.count, "", 1)
		if got := passcheck.MostInInterval(passes, sec); got > int(tt.count) {
			t.Errorf("count %v at %vx, phase %d: a real 1 s interval passed %d > %v", tt.count, tt.overload, tt.phase, got, tt.count)
		}
		if got, want := len(passes), int(5*tt.count); got != want {
			t.Errorf("count %v at %vx, phase %d: passed %d in 5 s, want %d", tt.count, tt.overload, tt.phase, got, want)
		}
	}
}

// A count under one call an interval is a rate: 0.5 a second passes one call
// every 2 s (a window of whole calls over one interval would pass none), and
// the Quota says 1 per 2 s. A fractional count above one passes its whole
// calls, and the Quota says those, not a rate no window keeps.
func TestRejectFractionalCount(t *testing.T) {
	c := compile(t, qps("r", 0.5)).Checker("r", "default")
	steps := []struct {
		at   int64
		pass bool
	}{{t0, true}, {t0 + sec, false}, {t0 + 2*sec - 1, false}, {t0 + 2*sec, true}, {t0 + 3*sec, false}, {t0 + 4*sec, true}}
	for i, s := range steps {
		tok, v := c.Enter(s.at, "", 1)
		if v.Blocked == s.pass {
			t.Fatalf("step %d: blocked %v, want pass %v", i, v.Blocked, s.pass)
		}
		tok.Exit(s.at, false)
		if v.Quota.Limit != 1 || v.Quota.Window != 2*time.Second {
			t.Fatalf("step %d: quota %v per %v, want 1 per 2s", i, v.Quota.Limit, v.Quota.Window)
		}
	}
	c = compile(t, qps("r", 10.5)).Checker("r", "default")
	_, v := c.Enter(t0, "", 1)
	if v.Quota.Limit != 10 || v.Quota.Window != time.Second {
		t.Errorf("count 10.5: quota %v per %v, want 10 per 1s", v.Quota.Limit, v.Quota.Window)
	}
}

// On a block, the Quota's Reset (the RateLimit t) is when this call fits,
// as Retry-After is (SPEC §4: a client that waits that long is passed): a
// call of more tokens than the oldest pass frees waits for later passes to
// leave. A call of more tokens than the window ever holds is told neither.
func TestRejectResetIsWhenTheCallFits(t *testing.T) {
	r := qps("r", 5)
	r.StatIntervalMs = 10000
	c := compile(t, r).Checker("r", "default")
	for _, call := range []struct{ at, n int64 }{{t0, 1}, {t0 + 2*sec, 3}} {
		if _, v := c.Enter(call.at, "", call.n); v.Blocked {
			t.Fatalf("call of %d at %d: %+v", call.n, call.at-t0, v)
		}
	}
	now := t0 + 3*sec
	_, v := c.Enter(now, "", 3)
	if !v.Blocked || !v.HasQuota {
		t.Fatalf("3 tokens over 4 of 5: %+v", v)
	}
	// The pass at t0 leaving (7 s) frees 1 token; the 3 at 2 s leaving (9 s) frees enough.
	if want := 9 * time.Second; v.RetryAfter != want || v.Quota.Reset != want {
		t.Errorf("RetryAfter %v, Reset (t) %v, want both %v", v.RetryAfter, v.Quota.Reset, want)
	}
	if _, v := c.Enter(now+int64(9*time.Second)-1, "", 3); !v.Blocked {
		t.Errorf("passed 1 ns before t")
	}
	if _, v := c.Enter(now+int64(9*time.Second), "", 3); v.Blocked {
		t.Errorf("refused at t: %+v", v)
	}

	if _, v := c.Enter(now+int64(20*time.Second), "", 6); !v.Blocked || v.HasQuota || v.RetryAfter != 0 {
		t.Errorf("6 tokens of a window of 5: %+v, want blocked with no quota and no RetryAfter", v)
	}

	// Swept: counts, start phases and calls of mixed sizes filling the
	// window; the refused call passes at t and not a nanosecond before.
	rng := rand.New(rand.NewPCG(3, 5))
	for _, count := range []float64{2, 3, 10, 100, 1000, 100000} {
		for ph := int64(0); ph < 10; ph++ {
			r := qps("r", count)
			r.StatIntervalMs = 10000
			c := compile(t, r).Checker("r", "default")
			start := t0 + ph*int64(997*time.Millisecond)
			at, used := start, int64(0)
			for used < int64(count) {
				n := min(1+rng.Int64N(int64(count)/2+1), int64(count)-used)
				if _, v := c.Enter(at, "", n); v.Blocked {
					t.Fatalf("count %v phase %d: a call of %d with %d used refused", count, ph, n, used)
				}
				used += n
				at += 1 + rng.Int64N(int64(time.Second))
			}
			n := 1 + rng.Int64N(int64(count))
			_, v := c.Enter(at, "", n)
			if !v.Blocked || !v.HasQuota || v.Quota.Reset != v.RetryAfter || v.RetryAfter <= 0 {
				t.Fatalf("count %v phase %d: %d tokens over a full window: %+v, want t = RetryAfter > 0", count, ph, n, v)
			}
			if _, v := c.Enter(at+int64(v.RetryAfter)-1, "", n); !v.Blocked {
				t.Fatalf("count %v phase %d: %d tokens passed 1 ns before t", count, ph, n)
			}
			if _, v := c.Enter(at+int64(v.RetryAfter), "", n); v.Blocked {
				t.Fatalf("count %v phase %d: %d tokens refused at t: %+v", count, ph, n, v)
			}
		}
	}
}

// A concurrency rule that blocks after a qps rule passed has no quota: the
// block carries neither the qps rule's reset as Retry-After nor its
// RateLimit values (the slot frees when a call ends, which no limiter can
// tell).
func TestConcurrencyBlockCarriesNoOtherRulesQuota(t *testing.T) {
	q := qps("r", 100)
	q.StatIntervalMs = 10000
	cc := qps("r", 1)
	cc.Grade = config.GradeConcurrency
	c := compile(t, q, cc).Checker("r", "default")
	tok, v := c.Enter(t0, "", 1)
	if v.Blocked {
		t.Fatalf("first call: %+v", v)
	}
	_, v = c.Enter(t0+sec, "", 1)
	if !v.Blocked || v.Reason != limiter.ReasonFlow || v.HasQuota || v.RetryAfter != 0 {
		t.Errorf("second call while one is in flight: %+v, want a flow block with no quota and no RetryAfter", v)
	}
	tok.Exit(t0+2*sec, false)
	if _, v := c.Enter(t0+2*sec, "", 1); v.Blocked {
		t.Errorf("after the first ended: %+v", v)
	}
}
