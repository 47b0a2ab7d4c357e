package system_test

import (
	"fmt"
	"math"
	"testing"

	"sluice/config"
	"sluice/limiter"
	"sluice/limiter/system"
)

// maxQps keeps the exact window's promise, swept over limits, overloads and
// start phases: a client whose calls are 1/maxQps s apart is never refused,
// no real second passes more than maxQps, and where the calls offered in a
// second are a whole number each second after the first passes exactly
// maxQps.
func TestMaxQpsProperty(t *testing.T) {
	for _, limit := range []float64{1, 2, 3, 5, 10, 100, 1000, 100000} {
		t.Run(fmt.Sprintf("maxQps=%g", limit), func(t *testing.T) {
			t.Parallel()
			secs := int64(4)
			if limit >= 100000 {
				secs = 2
			}
			for ph := int64(0); ph < 1000; ph += phaseStepMs {
				start := int64(1e12) + ph*ms
				g := system.New(config.System{MaxQps: limit}, nil, nil)
				k := int64(limit)
				for i := range secs * k {
					at := start + (i*sec+k-1)/k
					tok, v := g.Enter(at)
					if v.Blocked {
						if limit <= 1024 {
							t.Fatalf("phase %d ms: paced call %d refused", ph, i)
						}
						continue
					}
					tok.Exit(at, false)
				}
				for _, over := range []float64{1.05, 1.5, 3, 10} {
					g := system.New(config.System{MaxQps: limit}, nil, nil)
					step := float64(sec) / (limit * over)
					var passed []int64
					for i := int64(0); ; i++ {
						at := start + int64(math.Ceil(float64(i)*step))
						if at >= start+secs*sec {
							break
						}
						if tok, v := g.Enter(at); !v.Blocked {
							passed = append(passed, at)
							tok.Exit(at, false)
						}
					}
					if got := maxPerSecond(passed); got > k {
						t.Fatalf("phase %d ms, %vx: a real second passed %d > %d", ph, over, got, k)
					}
					perSec := limit * over
					if perSec != math.Trunc(perSec) || limit > 1024 {
						continue
					}
					for s := int64(1); s < secs; s++ {
						n := int64(0)
						for _, p := range passed {
							if p >= start+s*sec && p < start+(s+1)*sec {
								n++
							}
						}
						if n != k {
							t.Fatalf("phase %d ms, %vx: second %d passed %d, want %d", ph, over, s, n, k)
						}
					}
				}
			}
		})
	}
}

const sec = int64(1e9)

func maxPerSecond(passed []int64) int64 {
	var best int64
	j := 0
	for i := range passed {
		for j < len(passed) && passed[j] < passed[i]+sec {
			j++
		}
		best = max(best, int64(j-i))
	}
	return best
}

// A reload that changes maxQps keeps counting the last second's passes: 5
// passed under maxQps 5, so maxQps 6 lets one more through in that second,
// not six; and the passes still leave exactly one second after they passed.
func TestMaxQpsReloadKeepsTheWindow(t *testing.T) {
	start := int64(1e12)
	g := system.New(config.System{MaxQps: 5}, nil, nil)
	for i := range int64(5) {
		if tok, v := g.Enter(start + i*ms); v.Blocked {
			t.Fatalf("call %d blocked", i)
		} else {
			tok.Exit(start+i*ms, false)
		}
	}
	for _, tt := range []struct {
		maxQps float64
		at     int64
		passes int
	}{
		{6, start + 500*ms, 1},     // 5 of 6 already used
		{4, start + 600*ms, 0},     // 6 passed, over the new 4
		{4, start + sec + 2*ms, 1}, // the calls at 0..2 ms left; 3, 4 and 500 ms still count
	} {
		g = system.New(config.System{MaxQps: tt.maxQps}, g, nil)
		got := 0
		for range 10 {
			if tok, v := g.Enter(tt.at); !v.Blocked {
				got++
				tok.Exit(tt.at, false)
			}
		}
		if got != tt.passes {
			t.Errorf("maxQps %v at +%d ms: %d passed, want %d", tt.maxQps, (tt.at-start)/ms, got, tt.passes)
		}
	}
}

// A call maxQps refuses is told when it would pass (Retry-After): retried
// that long after, it passes; a nanosecond sooner, it is still refused. Swept
// over limits, the call's place in the window and start phases. The other
// checks cannot tell, and say 0.
func TestMaxQpsRetryAfterIsExact(t *testing.T) {
	for _, limit := range []float64{0.5, 1, 3, 10, 1000} {
		for ph := int64(0); ph < 1000; ph += phaseStepMs {
			start := int64(1e12) + ph*ms
			for _, gap := range []int64{0, 1, 250 * ms, 999 * ms} {
				g := system.New(config.System{MaxQps: limit}, nil, nil)
				// Fill the window with calls gap/limit apart, then one more.
				at := start
				k := max(int64(limit), 1)
				for i := range k {
					at = start + i*gap/k
					tok, v := g.Enter(at)
					if v.Blocked {
						t.Fatalf("maxQps %g phase %d gap %d: call %d of the first window refused", limit, ph, gap, i)
					}
					tok.Exit(at, false)
				}
				at++
				_, v := g.Enter(at)
				if !v.Blocked || v.Reason != limiter.ReasonSystem {
					t.Fatalf("maxQps %g phase %d gap %d: call over the limit %+v, want a system block", limit, ph, gap, v)
				}
				if v.RetryAfter <= 0 {
					t.Fatalf("maxQps %g phase %d gap %d: RetryAfter %v, want > 0", limit, ph, gap, v.RetryAfter)
				}
				retry := at + int64(v.RetryAfter)
				if _, v := g.Enter(retry - 1); !v.Blocked {
					t.Fatalf("maxQps %g phase %d gap %d: passed 1 ns before RetryAfter", limit, ph, gap)
				}
				if _, v := g.Enter(retry); v.Blocked {
					t.Fatalf("maxQps %g phase %d gap %d: refused at RetryAfter %v", limit, ph, gap, v.RetryAfter)
				}
			}
		}
	}

	g := system.New(config.System{MaxConcurrency: 1}, nil, nil)
	g.Enter(0)
	if _, v := g.Enter(1); !v.Blocked || v.RetryAfter != 0 {
		t.Fatalf("maxConcurrency block %+v, want blocked with RetryAfter 0", v)
	}
}
