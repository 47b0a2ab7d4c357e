package limiter_test

import (
	"fmt"
	"testing"
	"time"
)

// Checker.Room keeps its promise at every count, window and start phase: a
// call the first rule (count a second) refuses, while a second rule (count
// per a longer window) is full too, is told the second rule's wait; at it
// the call passes, a nanosecond sooner it is refused. The rules are filled
// by one call of count tokens, or, up to MaxSlots, by count calls of one
// token spread over the first 500 ms (each its own slot). Swept over counts
// 1 to 1e5, the second window and start phases every sweepStep.
func TestRoomIsExactProperty(t *testing.T) {
	for _, count := range []float64{1, 2, 3, 10, 100, 1000, 100000} {
		for _, ivMs := range []int64{2000, 10000, 60000} {
			for _, spread := range []bool{false, true} {
				if count > sweepMaxCount || spread && count > 1000 {
					continue
				}
				name := fmt.Sprintf("count=%g/iv=%dms/spread=%v", count, ivMs, spread)
				for ph := int64(0); ph < sec; ph += sweepStep {
					checkRoom(t, name, count, ivMs, spread, t0-t0%sec+ph)
				}
			}
		}
	}
}

func checkRoom(t *testing.T, name string, count float64, ivMs int64, spread bool, start int64) {
	t.Helper()
	long := qps("r", count)
	long.StatIntervalMs = ivMs
	c := compile(t, qps("r", count), long).Checker("r", "default")
	where := fmt.Sprintf("%s/phase=%dms", name, (start%sec)/ms)
	n, calls := int64(count), int64(1)
	if spread {
		n, calls = 1, int64(count)
	}
	for i := range calls {
		at := start + i*500*ms/calls
		tok, v := c.Enter(at, "", n)
		if v.Blocked {
			t.Fatalf("%s: filling call %d refused: %+v", where, i, v)
		}
		tok.Exit(at, false)
	}
	now := start + 600*ms
	_, v := c.Enter(now, "", 1)
	if !v.Blocked || v.RetryAfter <= 0 {
		t.Fatalf("%s: a call over both rules: %+v, want refused with a retry", where, v)
	}
	// The longer window frees its first pass ivMs after it.
	want := start + ivMs*ms - now
	got := c.Room(now, "", 1, int64(v.RetryAfter), nil)
	if got != want {
		t.Fatalf("%s: Room %v, want %v (the %dms window's first pass leaving)", where, time.Duration(got), time.Duration(want), ivMs)
	}
	if _, v := c.Enter(now+got-1, "", 1); !v.Blocked {
		t.Fatalf("%s: passed 1 ns before Room", where)
	}
	if _, v := c.Enter(now+got, "", 1); v.Blocked {
		t.Fatalf("%s: refused at Room: %+v", where, v)
	}
}
