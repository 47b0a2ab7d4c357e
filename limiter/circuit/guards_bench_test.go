package circuit_test

import (
	"sync/atomic"
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter/circuit"
	"sluice/limiter/system"
)

// guards are the system guard and a resource's breakers as a route uses
// them: system first, degrade last, both finished after the upstream answered.
type guards struct {
	sys *system.Guard
	cb  *circuit.Breakers
}

func newGuards(tb testing.TB) guards {
	s := circuit.Compile(defaulted(
		config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorRatio, Threshold: 0.5, StatIntervalMs: 1000, MinRequestAmount: 5, RetryTimeoutMs: 1000},
		config.DegradeRule{Resource: "r", Strategy: config.DegradeSlowRatio, MaxAllowedRtMs: 200, Threshold: 0.5, StatIntervalMs: 1000, MinRequestAmount: 5, RetryTimeoutMs: 1000},
	), nil, nil)
	s.Install()
	sys := system.New(config.System{MaxConcurrency: 1 << 40, Adaptive: true}, nil, nil)
	return guards{sys: sys, cb: s.For("r")}
}

func (g guards) request(now int64) {
	st, v := g.sys.Enter(now)
	if v.Blocked {
		return
	}
	ct, v := g.cb.Enter(now)
	if v.Blocked {
		st.Cancel(now)
		return
	}
	ct.Exit(now, time.Millisecond, 200)
	st.Exit(now, false)
}

// BenchmarkGuardsPerRequest is what circuit breaking and system protection
// add to one request: system (maxConcurrency + adaptive) and two breakers
// (errorRatio + slowRatio) on the resource, entered and exited.
func BenchmarkGuardsPerRequest(b *testing.B) {
	g := newGuards(b)
	b.ReportAllocs()
	now := int64(0)
	for b.Loop() {
		now += 1000
		g.request(now)
	}
}

func BenchmarkGuardsPerRequestParallel(b *testing.B) {
	g := newGuards(b)
	var clock atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			g.request(clock.Add(1000))
		}
	})
}

func TestGuardsAllocateNothing(t *testing.T) {
	g := newGuards(t)
	now := int64(0)
	if allocs := testing.AllocsPerRun(1000, func() { now += 1000; g.request(now) }); allocs != 0 {
		t.Errorf("system + breakers per request allocate %v times, want 0", allocs)
	}
}
