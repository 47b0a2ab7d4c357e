package system_test

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"sluice/config"
	"sluice/limiter"
	"sluice/limiter/system"
)

const ms = int64(1e6)

// fakeCPU is a CPUUsage the test sets.
type fakeCPU struct{ bits atomic.Uint64 }

func (f *fakeCPU) Set(u float64)  { f.bits.Store(math.Float64bits(u)) }
func (f *fakeCPU) Usage() float64 { return math.Float64frombits(f.bits.Load()) }

func cpuAt(u float64) *fakeCPU { f := &fakeCPU{}; f.Set(u); return f }

func TestAllOffPassesEverything(t *testing.T) {
	for _, g := range []*system.Guard{nil, system.New(config.System{}, nil, nil)} {
		for i := int64(0); i < 1000; i++ {
			tok, v := g.Enter(i)
			if v.Blocked {
				t.Fatalf("all-off guard blocked call %d", i)
			}
			tok.Exit(i, true)
		}
	}
}

func TestMaxQps(t *testing.T) {
	g := system.New(config.System{MaxQps: 5}, nil, nil)
	steps := []struct {
		at   int64 // ms
		want bool  // blocked
	}{
		{0, false}, {10, false}, {20, false}, {30, false}, {40, false},
		{50, true},    // 6th in the second
		{999, true},   // the first five are still in the window
		{1000, false}, // the call at 0 left it, exactly one second later
		{1001, true},
		{1010, false},
		{1019, true},
		{1020, false},
		{1030, false},
		{1040, false},
		{1041, true},
	}
	for _, s := range steps {
		tok, v := g.Enter(s.at * ms)
		if v.Blocked != s.want {
			t.Fatalf("at %d ms: blocked=%v, want %v", s.at, v.Blocked, s.want)
		}
		if v.Blocked && v.Reason != limiter.ReasonSystem {
			t.Fatalf("reason %v, want system", v.Reason)
		}
		tok.Exit(s.at*ms, false)
	}

	// A cancelled call gives its pass back.
	g = system.New(config.System{MaxQps: 1}, nil, nil)
	tok, _ := g.Enter(0)
	tok.Cancel(0)
	if _, v := g.Enter(1); v.Blocked {
		t.Fatalf("pass of a cancelled call was not given back")
	}
}

// TestMaxQpsSlidingIsExact offers 1 call per ms (1000 QPS) against maxQps for
// ten seconds and checks every real one-second interval, first included, also
// when the calls start in the middle of a 50 ms bucket (before, a bucket left
// the window one second after its start, so a second could pass up to 2x).
func TestMaxQpsSlidingIsExact(t *testing.T) {
	for _, tt := range []struct{ limit, start int64 }{{100, 0}, {100, 25}, {10, 25}, {10, 49}} {
		g := system.New(config.System{MaxQps: float64(tt.limit)}, nil, nil)
		var passed []int64
		for at := tt.start; at < 10_000; at++ {
			tok, v := g.Enter(at * ms)
			if !v.Blocked {
				passed = append(passed, at)
				tok.Exit(at*ms, false)
			}
		}
		worst := int64(0)
		for i, start := range passed {
			n := int64(0)
			for _, p := range passed[i:] {
				if p >= start+1000 {
					break
				}
				n++
			}
			worst = max(worst, n)
		}
		if worst > tt.limit {
			t.Errorf("maxQps %d from %d ms: a one-second interval passed %d calls, want <= %d", tt.limit, tt.start, worst, tt.limit)
		}
		if n := int64(len(passed)); n < 10*tt.limit*95/100 {
			t.Errorf("maxQps %d from %d ms: %d passed in 10 s, want about %d", tt.limit, tt.start, n, 10*tt.limit)
		}
	}
}

func TestMaxConcurrency(t *testing.T) {
	g := system.New(config.System{MaxConcurrency: 2}, nil, nil)
	a, v1 := g.Enter(0)
	b, v2 := g.Enter(0)
	if v1.Blocked || v2.Blocked {
		t.Fatalf("first two blocked")
	}
	if _, v := g.Enter(0); !v.Blocked || v.Reason != limiter.ReasonSystem {
		t.Fatalf("third in flight: %+v, want blocked by system", v)
	}
	a.Exit(1, false)
	a.Exit(1, false) // a second Exit does nothing
	c, v := g.Enter(2)
	if v.Blocked {
		t.Fatalf("blocked after one finished")
	}
	if _, v := g.Enter(2); !v.Blocked {
		t.Fatalf("double Exit freed two slots")
	}
	b.Cancel(3)
	c.Exit(3, true)
}

// TestMaxConcurrencyStress hammers the guard from many goroutines and checks
// that calls in flight never exceed the limit.
func TestMaxConcurrencyStress(t *testing.T) {
	const limit = 4
	for _, cfg := range []config.System{
		{MaxConcurrency: limit},
		{MaxConcurrency: limit, MaxQps: 1e12, Adaptive: true}, // the locked path too
	} {
		g := system.New(cfg, nil, nil)
		var (
			inFlight, worst, blocked atomic.Int64
			clock                    atomic.Int64
			wg                       sync.WaitGroup
		)
		for w := 0; w < 32; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 2000; i++ {
					tok, v := g.Enter(clock.Add(1000))
					if v.Blocked {
						blocked.Add(1)
						continue
					}
					n := inFlight.Add(1)
					for {
						old := worst.Load()
						if n <= old || worst.CompareAndSwap(old, n) {
							break
						}
					}
					runtime.Gosched() // hold the slot while others try
					inFlight.Add(-1)
					if i%2 == 0 {
						tok.Exit(clock.Add(1000), false)
					} else {
						tok.Cancel(clock.Add(1000))
					}
				}
			}()
		}
		wg.Wait()
		if worst.Load() > limit || blocked.Load() == 0 {
			t.Errorf("%+v: %d calls in flight (limit %d), %d blocked", cfg, worst.Load(), limit, blocked.Load())
		}
		if tok, v := g.Enter(clock.Add(1000)); v.Blocked {
			t.Errorf("%+v: slots leaked: blocked with nothing in flight", cfg)
		} else {
			tok.Exit(clock.Add(1000), false)
		}
		t.Logf("%+v: worst in flight %d, %d blocked", cfg, worst.Load(), blocked.Load())
	}
}

func TestMaxAvgRt(t *testing.T) {
	g := system.New(config.System{MaxAvgRtMs: 100}, nil, nil)
	slow, _ := g.Enter(0)
	slow.Exit(200*ms, false) // avg RT of the last second: 200 ms

	held, v := g.Enter(300 * ms)
	if v.Blocked {
		t.Fatalf("idle gateway blocked a call: avg RT alone must not block it")
	}
	if _, v := g.Enter(310 * ms); !v.Blocked || v.Reason != limiter.ReasonSystem {
		t.Fatalf("avg RT 200 ms > 100 with a call in flight: %+v, want blocked", v)
	}
	// Fast calls bring the average under the limit: (200+10+0)/3 = 70 ms.
	held.Exit(310*ms, false)
	c, _ := g.Enter(320 * ms)
	c.Exit(320*ms, false)
	busy, _ := g.Enter(325 * ms)
	if _, v := g.Enter(330 * ms); v.Blocked {
		t.Fatalf("avg 70 ms with a call in flight: blocked")
	}
	busy.Exit(330*ms, false)
	// A slow average ages out of the window after a second.
	g = system.New(config.System{MaxAvgRtMs: 100}, nil, nil)
	slow, _ = g.Enter(0)
	slow.Exit(500*ms, true) // failures count towards the average RT too
	held, _ = g.Enter(600 * ms)
	if _, v := g.Enter(1499 * ms); !v.Blocked {
		t.Fatalf("at 1499 ms: passed, want blocked")
	}
	if _, v := g.Enter(1550 * ms); v.Blocked {
		t.Fatalf("at 1550 ms the slow call left the window: blocked")
	}
	held.Exit(1600*ms, false)
}

func TestMaxCpuUsage(t *testing.T) {
	cpu := cpuAt(0.5)
	for _, cfg := range []config.System{
		{MaxCpuUsage: 0.8},
		{MaxCpuUsage: 0.8, MaxConcurrency: 100},
		{MaxCpuUsage: 0.8, MaxQps: 1e9},
	} {
		g := system.New(cfg, nil, cpu)
		for _, step := range []struct {
			usage float64
			want  bool
		}{{0.5, false}, {0.8, false}, {0.81, true}, {1, true}, {0.79, false}} {
			cpu.Set(step.usage)
			tok, v := g.Enter(0)
			if v.Blocked != step.want || (v.Blocked && v.Reason != limiter.ReasonSystem) {
				t.Errorf("%+v, cpu %.2f: %+v, want blocked=%v", cfg, step.usage, v, step.want)
			}
			tok.Exit(0, false)
		}
	}
	// A nil CPUUsage reads as 0.
	if _, v := system.New(config.System{MaxCpuUsage: 0.1}, nil, nil).Enter(0); v.Blocked {
		t.Errorf("nil CPUUsage blocked")
	}
}

// sim drives a guard with synthetic traffic: one arrival per ms from `from`
// to `to` (ms), each taking rtMs(at) to complete, and reports how many were
// blocked and the most calls ever in flight.
type sim struct {
	g       *system.Guard
	pending []pending
}

type pending struct {
	tok  system.Token
	done int64
}

func (s *sim) run(from, to int64, rtMs func(at int64) int64) (blocked, worst int) {
	for at := from; at < to; at++ {
		keep := s.pending[:0]
		for _, p := range s.pending {
			if p.done <= at {
				p.tok.Exit(p.done*ms, false)
			} else {
				keep = append(keep, p)
			}
		}
		s.pending = keep
		tok, v := s.g.Enter(at * ms)
		if v.Blocked {
			blocked++
			continue
		}
		s.pending = append(s.pending, pending{tok, at + rtMs(at)})
		worst = max(worst, len(s.pending))
	}
	return blocked, worst
}

func constRt(d int64) func(int64) int64 { return func(int64) int64 { return d } }

func TestAdaptive(t *testing.T) {
	// Busy: 1000 QPS of 10 ms calls, about 10 in flight: nothing is shed.
	s := &sim{g: system.New(config.System{Adaptive: true}, nil, nil)}
	if blocked, _ := s.run(0, 3000, constRt(10)); blocked != 0 {
		t.Fatalf("busy but healthy: %d of 3000 shed, want 0", blocked)
	}

	// Saturated: the upstream now takes 200 ms per call. Without protection
	// 200 calls would pile up; the guard keeps in flight near the measured
	// bandwidth-delay product (1000/s x 10 ms = 10): within its swing
	// (10 + 4 sqrt(10) + 4 = 26.6) until the slow calls' times come in, then
	// closer.
	blocked, worst := s.run(3000, 5000, constRt(200))
	if blocked == 0 || worst > 27 {
		t.Errorf("saturated: %d shed, worst in flight %d; want shedding and <= 27 in flight", blocked, worst)
	}
	t.Logf("saturated: %d of 2000 shed, worst in flight %d", blocked, worst)

	// Without adaptive the same load piles up.
	s2 := &sim{g: system.New(config.System{MaxQps: 1e9}, nil, nil)}
	s2.run(0, 3000, constRt(10))
	if _, worst := s2.run(3000, 5000, constRt(200)); worst < 150 {
		t.Errorf("unprotected worst in flight %d, expected a pile-up", worst)
	}
}

func TestAdaptiveNeedsHistory(t *testing.T) {
	// A burst at start, with no completed second yet, is not shed.
	s := &sim{g: system.New(config.System{Adaptive: true}, nil, nil)}
	if blocked, _ := s.run(0, 900, constRt(300)); blocked != 0 {
		t.Errorf("no history: %d shed, want 0", blocked)
	}
}

func TestAdaptiveGatedByCpu(t *testing.T) {
	cpu := cpuAt(0.2)
	s := &sim{g: system.New(config.System{Adaptive: true, MaxCpuUsage: 0.8}, nil, cpu)}
	s.run(0, 3000, constRt(10))
	if blocked, _ := s.run(3000, 4000, constRt(200)); blocked != 0 {
		t.Errorf("cpu low: saturated traffic shed (%d), want none: CPU is the trigger", blocked)
	}
	cpu.Set(0.95)
	if blocked, worst := s.run(4000, 5000, constRt(200)); blocked == 0 {
		t.Errorf("cpu high and saturated: nothing shed (worst in flight %d)", worst)
	}
	// High CPU alone does not block a gateway that is not saturated.
	s = &sim{g: system.New(config.System{Adaptive: true, MaxCpuUsage: 0.8}, nil, cpu)}
	if blocked, _ := s.run(0, 3000, constRt(10)); blocked != 0 {
		t.Errorf("cpu high, not saturated: %d shed", blocked)
	}
}

func TestNewKeepsStatistics(t *testing.T) {
	cfg := config.System{MaxConcurrency: 2}
	g1 := system.New(cfg, nil, nil)
	a, _ := g1.Enter(0)
	b, _ := g1.Enter(0)
	g2 := system.New(cfg, g1, nil)
	if _, v := g2.Enter(1); !v.Blocked {
		t.Fatalf("in-flight calls of the old guard were forgotten")
	}
	a.Exit(2, false) // finishes into the shared statistics
	c, v := g2.Enter(3)
	if v.Blocked {
		t.Fatalf("slot of an old call not freed")
	}
	b.Exit(4, false)
	c.Exit(4, false)

	q1 := system.New(config.System{MaxQps: 2}, nil, nil)
	q1.Enter(0)
	q1.Enter(0)
	if _, v := system.New(config.System{MaxQps: 2}, q1, nil).Enter(1); !v.Blocked {
		t.Errorf("qps window was reset by New")
	}
}

func TestEnterExitAllocatesNothing(t *testing.T) {
	cpu := cpuAt(0.1)
	for _, cfg := range []config.System{
		{},
		{MaxQps: 1e12, MaxConcurrency: 1 << 40, MaxAvgRtMs: 1 << 30, MaxCpuUsage: 0.99, Adaptive: true},
	} {
		g := system.New(cfg, nil, cpu)
		now := int64(0)
		allocs := testing.AllocsPerRun(1000, func() {
			now += ms
			tok, _ := g.Enter(now)
			tok.Exit(now+ms, false)
			tok, _ = g.Enter(now)
			tok.Cancel(now)
		})
		if allocs != 0 {
			t.Errorf("%+v: %v allocs per Enter+Exit, want 0", cfg, allocs)
		}
	}
}

// TestAnsweredTimeIsTheHead: a call answered by a tunnel or an event
// stream (Token.Answered) has the response time of its answer's head, not
// of its life: a stream of a minute does not lift the average past
// maxAvgRtMs, nor block the calls after it.
func TestAnsweredTimeIsTheHead(t *testing.T) {
	g := system.New(config.System{MaxAvgRtMs: 100}, nil, nil)
	stream, _ := g.Enter(0)
	stream.Answered(10 * ms)
	waiting, _ := g.Enter(60000 * ms)
	stream.Exit(60000*ms, false) // the stream ends a minute later
	if _, v := g.Enter(60001 * ms); v.Blocked {
		t.Error("a minute-long stream, answered in 10 ms, blocked a call as if the average were a minute")
	}
	waiting.Exit(60010*ms, false)
}

// TestCancelAfterAnsweredLeavesNothingOpen: a token answered (a tunnel, a
// stream) and then cancelled rather than exited counts no open call after
// it: one left behind would hide a waiting call from maxAvgRtMs and the
// adaptive check for good.
func TestCancelAfterAnsweredLeavesNothingOpen(t *testing.T) {
	g := system.New(config.System{MaxAvgRtMs: 100}, nil, nil)
	tok, _ := g.Enter(0)
	tok.Answered(1 * ms)
	tok.Cancel(2 * ms)
	slow, _ := g.Enter(10 * ms)
	slow.Exit(500*ms, false) // 490 ms: the average is past 100
	waiting, _ := g.Enter(500 * ms)
	if _, v := g.Enter(501 * ms); !v.Blocked {
		t.Error("a call waits and the average is past maxAvgRtMs, yet a call passed: a cancelled tunnel still counted open")
	}
	waiting.Exit(600*ms, false)
}
