package limiter_test

import (
	"fmt"
	"math"
	"testing"

	"sluice/internal/passcheck"
	"sluice/limiter"
	"sluice/limiter/window"
)

// A qps reject rule keeps the exact window's promise through the Checker,
// swept over counts, statIntervalMs, acquireCount, overloads and start
// phases (0 to 999 ms, every 37 ms; every 111 ms at count 100000, whose
// interval is 1 s alone):
//   - a client sending floor(count/n) calls of n tokens an interval, evenly,
//     is never refused (above window.MaxSlots tokens: at most one group of
//     ceil(count/MaxSlots) tokens an interval is);
//   - no real interval holds more than count tokens, at 1.05x to 10x;
//   - where the calls offered in an interval are a whole number, each
//     interval after the first passes exactly count (rounded down to whole
//     calls), or within 0.1% below it above MaxSlots.
func TestRejectExactProperty(t *testing.T) {
	for _, count := range []float64{1, 2, 3, 5, 10, 100, 1000, 100000} {
		for _, ivMs := range []int64{100, 1000, 60000} {
			for _, n := range []int64{1, 3} {
				// At count 100000, 2M calls a phase: the window's own sweep
				// (window.TestExactProperty) takes it at every interval, and
				// the Checker hands count and interval to the window alike
				// at every count; one interval here.
				if float64(n) > count || count > sweepMaxCount || count >= 100000 && ivMs != 1000 {
					continue
				}
				t.Run(fmt.Sprintf("count=%g/iv=%dms/n=%d", count, ivMs, n), func(t *testing.T) {
					t.Parallel()
					step := sweepStep
					if count >= 100000 {
						// 2M calls a phase, 2/3 of the sweep's time at
						// every 37 ms: every 111 ms (9 phases) instead.
						step = 3 * sweepStep
					}
					for ph := int64(0); ph < sec; ph += step {
						checkRejectCase(t, count, ivMs*ms, n, t0-t0%sec+ph)
					}
				})
			}
		}
	}
}

func checkRejectCase(t *testing.T, count float64, iv, n, start int64) {
	intervals := int64(4)
	if count >= 100000 {
		intervals = 2
	}
	r := qps("r", count)
	r.StatIntervalMs = iv / ms
	grouped := count > window.MaxSlots
	// paced
	c := compile(t, r).Checker("r", "default")
	per := int64(count) / n
	refused := 0
	for i := range intervals * per {
		at := start + (i*iv+per-1)/per
		if !enterExit(c, at, n) {
			refused++
		}
	}
	if g := math.Ceil(count / window.MaxSlots); refused > 0 && (!grouped || float64(refused) > float64(intervals)*g) {
		t.Fatalf("phase %d ms: %d of %d paced calls refused", (start%sec)/ms, refused, intervals*per)
	}
	for _, over := range []float64{1.05, 1.5, 3, 10} {
		c := compile(t, r).Checker("r", "default")
		step := float64(iv) * float64(n) / (count * over)
		passed := make([]int64, 0, (intervals+1)*int64(count)/n) // the most that can pass
		for i := int64(0); ; i++ {
			at := start + int64(math.Ceil(float64(i)*step))
			if at >= start+intervals*iv {
				break
			}
			if enterExit(c, at, n) {
				passed = append(passed, at)
			}
		}
		if got := int64(passcheck.MostInInterval(passed, iv)) * n; got > int64(count) {
			t.Fatalf("phase %d ms, %vx: a real interval held %d tokens > %v", (start%sec)/ms, over, got, count)
		}
		if perIv := float64(iv) / step; perIv != math.Trunc(perIv) {
			continue
		}
		want := int64(count) / n * n
		for k := int64(1); k < intervals; k++ {
			var got int64
			for _, p := range passed {
				if p >= start+k*iv && p < start+(k+1)*iv {
					got += n
				}
			}
			if got != want && (!grouped || float64(got) < float64(want)*0.999) {
				t.Fatalf("phase %d ms, %vx: interval %d passed %d tokens, want %d", (start%sec)/ms, over, k, got, want)
			}
		}
	}
}

func enterExit(c *limiter.Checker, at, n int64) bool {
	tok, v := c.Enter(at, "", n)
	if v.Blocked {
		return false
	}
	tok.Exit(at, false)
	return true
}
