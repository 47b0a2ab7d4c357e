package window_test

import (
	"testing"
	gotime "time"

	"sluice/limiter/window"
)

// TestWholeCalls: a count under one call an interval is one call per the
// fewest whole intervals that hold one; from one up, the count floored.
func TestWholeCalls(t *testing.T) {
	s := int64(gotime.Second)
	tests := []struct {
		count    float64
		interval int64
		ns       int64
		limit    float64
	}{
		{0, s, s, 0},
		{0.5, s, 2 * s, 1},
		{0.3, s, 4 * s, 1},
		{1.0 / 3, s, 3 * s, 1},
		{0.7, 60 * s, 120 * s, 1},
		{0.99, s, 2 * s, 1},
		{1, s, s, 1},
		{2.5, s, s, 2},
		{1e-30, s, (int64(^uint64(0)>>1) / 4 / s) * s, 0},
	}
	for _, tt := range tests {
		ns, limit := window.WholeCalls(tt.count, tt.interval)
		if ns != tt.ns || limit != tt.limit {
			t.Errorf("WholeCalls(%g, %v) = %v, %g; want %v, %g", tt.count, gotime.Duration(tt.interval), gotime.Duration(ns), limit, gotime.Duration(tt.ns), tt.limit)
		}
	}
}
