package system_test

import (
	"testing"

	"sluice/config"
	"sluice/limiter/system"
)

// Adaptive mode takes minRt from completed seconds only: a steady, healthy
// 100 calls/s of 50 ms (5 in flight, the BDP is 100 x 50 ms = 5) is not shed
// when the first call to complete in a new second is a 1 ms one (a health
// check, a cached answer), which would otherwise be that second's whole
// "average" and shrink the estimate to almost nothing.
func TestAdaptiveMinRtIgnoresCurrentSecond(t *testing.T) {
	for _, tt := range []struct {
		name string
		fast bool
	}{
		{"steady", false},
		{"one 1 ms call as each second's first completion", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &sim{g: system.New(config.System{Adaptive: true}, nil, nil)}
			blocked := 0
			step := func(at, rtMs int64) {
				b, _ := s.run(at, at+1, constRt(rtMs))
				blocked += b
			}
			for at := int64(5); at < 5000; at += 10 { // 100/s of 50 ms, arriving at x5 ms
				step(at, 50)
				if tt.fast && at%1000 == 995 {
					step(at+4, 1) // completes at x000 ms: the next second's first
				}
			}
			if blocked != 0 {
				t.Errorf("%d calls shed, want 0 (in flight never exceeds the proven 5)", blocked)
			}
		})
	}
}
