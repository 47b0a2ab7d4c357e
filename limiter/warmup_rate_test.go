package limiter

import (
	"math"
	"testing"
)

// A full bucket's rate is exactly count/coldFactor wherever that is whole,
// so that a cold window passes exactly that many (docs/rules.md): swept
// over counts 1 to 3000, coldFactors whole and halves, warm-up periods of 1
// to 40 s and statIntervalMs from 100 ms to a minute (so whole and
// fractional periods), for warmUp (minRate 1) and warmUpThrottle (0). And
// where it is not whole, its integer part is floor(count/coldFactor).
// Sentinel's 1/((maxTok-warning)*slope + 1/count) rounded 241 (count 723,
// coldFactor 3, 3 s) to 240.99999999999997.
func TestWarmRateColdExact(t *testing.T) {
	bad := 0
	for _, cf2 := range []int{3, 4, 5, 6, 7, 8, 10, 20} { // coldFactor*2: 1.5 to 10
		cf := float64(cf2) / 2
		for _, ivMs := range []float64{100, 1000, 7000, 60000} {
			for periodSec := 1.0; periodSec <= 40; periodSec++ {
				periods := periodSec * 1e9 / (ivMs * 1e6)
				for count := 1; count <= 3000; count++ {
					for _, minRate := range []float64{0, 1} {
						p := newWarmParams(float64(count), periods, cf, minRate)
						got := p.rate(p.maxTok)
						// count/coldFactor = 2*count/cf2, in integers
						want, whole := float64(2*count/cf2), 2*count%cf2 == 0
						want = max(want, minRate)
						if whole && got != want || !whole && math.Floor(got) != want {
							if bad++; bad <= 10 {
								t.Errorf("count %d, coldFactor %g, warmUpPeriodSec %g, statIntervalMs %g, minRate %g: cold rate %v, want %v",
									count, cf, periodSec, ivMs, minRate, got, 2*float64(count)/float64(cf2))
							}
						}
					}
				}
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d cases in all", bad)
	}
}
