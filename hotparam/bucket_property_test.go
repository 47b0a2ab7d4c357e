package hotparam_test

import (
	"testing"
	"time"
)

// TestQPSBucketPassesItsCountAtEveryCount: for every count and durationSec,
// a value's full bucket passes exactly count + burstCount calls at one
// instant (not one less because a token's cost in nanoseconds was rounded
// up: 1e9/6 ns rounds to 166666667, and six of those are more than a second),
// and a steady overload then passes exactly count per durationSec.
func TestQPSBucketPassesItsCountAtEveryCount(t *testing.T) {
	counts := []float64{1, 2, 3, 6, 7, 9, 11, 13, 17, 29, 30, 33, 49, 97, 99, 101, 333, 999, 1000, 3001, 7777}
	for _, durationSec := range []int64{1, 3, 7, 60} {
		for _, burst := range []int64{0, 5} {
			for _, count := range counts {
				r := seedRule()
				r.Items, r.Count, r.DurationSec, r.BurstCount = nil, count, durationSec, burst
				c := compile(t, r).For("get-order")
				window := int64(time.Duration(durationSec) * time.Second)
				full := int(count) + int(burst)
				pass := func(at int64, calls int) int {
					n := 0
					for range calls {
						if tok, v := c.Enter(at, order("1"), 1); !v.Blocked {
							n++
							tok.Exit(at, 200)
						}
					}
					return n
				}
				if got := pass(0, full+5); got != full {
					t.Errorf("count %v, burst %d, durationSec %d: a full bucket passed %d at one instant, want %d",
						count, burst, durationSec, got, full)
				}
				// Offered twice the count each window, at its end: count passes.
				for k := int64(1); k <= 3; k++ {
					if got := pass(k*window, 2*int(count)); got != int(count) {
						t.Errorf("count %v, burst %d, durationSec %d: window %d passed %d, want %d",
							count, burst, durationSec, k, got, int(count))
					}
				}
			}
		}
	}
}
