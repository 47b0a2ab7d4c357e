package limiter_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"sluice/config"
)

// The seed example (count 10, warmUpPeriodSec 5, coldFactor 3, 30 calls a
// second from cold) gives Sentinel's curve when the load starts on a whole
// second.
func TestWarmUpSeedCurve(t *testing.T) {
	start := (t0/sec + 1) * sec
	r := warmRule(10, 5, config.BehaviorWarmUp)
	c := compile(t, r).Checker("r", "default")
	got := perSecond(drive(c, start, 10*sec, 30, "", 1), start, 10)
	if want := []int{3, 3, 3, 4, 5, 6, 9, 10, 10, 10}; !slices.Equal(got, want) {
		t.Errorf("passes per second %v, want %v", got, want)
	}
}

// The warm-up curve does not depend on where on the interval grid the load
// starts: from cold at every phase in 1 ms steps, under 3x and 10x overload,
// the first second passes at most ceil(count/coldFactor)+1, the rule passes
// count a second from warmUpPeriodSec+2 s on and stays there, and every phase
// gives the curve of phase 0. warmUpThrottle likewise.
func TestWarmUpEveryPhase(t *testing.T) {
	tests := []struct {
		count    float64
		period   int64
		behavior config.ControlBehavior
	}{
		{10, 5, config.BehaviorWarmUp},
		{100, 10, config.BehaviorWarmUp},
		{2, 10, config.BehaviorWarmUp},
		{10, 5, config.BehaviorWarmUpThrottle},
		{100, 10, config.BehaviorWarmUpThrottle},
		{2, 10, config.BehaviorWarmUpThrottle},
	}
	for _, tt := range tests {
		for _, over := range []float64{3, 10} {
			t.Run(fmt.Sprintf("%s/count=%g/%gx", tt.behavior, tt.count, over), func(t *testing.T) {
				t.Parallel()
				secs := int(tt.period) + 6
				first := int(math.Ceil(tt.count/3)) + 1
				var curve0 []int
				for ph := int64(0); ph < sec; ph += phaseStep {
					r := warmRule(tt.count, tt.period, tt.behavior)
					r.MaxQueueingTimeMs = 1000
					c := compile(t, r).Checker("r", "default")
					start := (t0/sec+1)*sec + ph
					got := perSecond(drive(c, start, int64(secs)*sec, over*tt.count, "", 1), start, secs)
					if got[0] > first {
						t.Fatalf("phase %d ms: first second passed %d > %d: %v", ph/ms, got[0], first, got)
					}
					for s := int(tt.period) + 2; s < secs; s++ {
						if float64(got[s]) != tt.count {
							t.Fatalf("phase %d ms: second %d passed %d, want %v: %v", ph/ms, s, got[s], tt.count, got)
						}
					}
					if curve0 == nil {
						curve0 = got
					} else if !slices.Equal(got, curve0) {
						t.Fatalf("phase %d ms: curve %v, phase 0: %v", ph/ms, got, curve0)
					}
				}
				t.Logf("curve %v", curve0)
			})
		}
	}
}
