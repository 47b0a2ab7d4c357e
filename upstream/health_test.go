package upstream

import (
	"testing"
	"time"
)

// TestHealthThresholds steps the active-check state machine through probe
// results on synthetic time: down after unhealthyThreshold bad probes in a
// row, up after healthyThreshold good ones in a row, and a run broken by
// the other result starts again.
func TestHealthThresholds(t *testing.T) {
	hc := &HealthCheck{Interval: time.Second, Timeout: time.Second, HealthyThreshold: 2, UnhealthyThreshold: 3}
	steps := []struct {
		good    bool
		down    bool
		changed bool
	}{
		{good: false, down: false},
		{good: false, down: false},
		{good: true, down: false}, // breaks the run of bad probes
		{good: false, down: false},
		{good: false, down: false},
		{good: false, down: true, changed: true}, // 3rd bad in a row
		{good: false, down: true},
		{good: true, down: true},
		{good: false, down: true}, // breaks the run of good probes
		{good: true, down: true},
		{good: true, down: false, changed: true}, // 2nd good in a row
		{good: true, down: false},
	}
	var h health
	for i, s := range steps {
		now := int64(i) * int64(time.Second)
		changed := h.observe(now, s.good, hc)
		if h.down != s.down || changed != s.changed {
			t.Fatalf("step %d (good=%v): down=%v changed=%v, want down=%v changed=%v", i, s.good, h.down, changed, s.down, s.changed)
		}
		if changed && h.since != now {
			t.Fatalf("step %d: since=%d, want %d", i, h.since, now)
		}
	}
}

// TestProbeSpacing: probes come every 0.8 to 1 interval, so a target whose
// checks start failing right after a good probe is down within interval x
// unhealthyThreshold (plus the probes' own time); the first probe comes
// within a fifth of the interval.
func TestProbeSpacing(t *testing.T) {
	iv := 5 * time.Second
	for _, r := range []float64{0, 0.25, 0.5, 0.999999} {
		if d := nextProbe(iv, r); d < 4*time.Second || d > iv {
			t.Errorf("nextProbe(%v, %v) = %v, want within [4s, 5s]", iv, r, d)
		}
		if d := firstProbe(iv, r); d < 0 || d > time.Second {
			t.Errorf("firstProbe(%v, %v) = %v, want within [0, 1s]", iv, r, d)
		}
	}
	// Worst case: every wait as long as allowed; the target turns bad just
	// after a good probe at t=0.
	hc := &HealthCheck{Interval: iv, Timeout: time.Second, HealthyThreshold: 1, UnhealthyThreshold: 3}
	var h health
	now := int64(0)
	for range 3 {
		now += int64(nextProbe(iv, 0.999999))
		h.observe(now, false, hc)
	}
	if !h.down || time.Duration(now) > iv*3 {
		t.Fatalf("down=%v at %v; want down by %v", h.down, time.Duration(now), iv*3)
	}
}
