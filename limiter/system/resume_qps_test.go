package system_test

import (
	"slices"
	"testing"

	"sluice/config"
	"sluice/internal/passcheck"
	"sluice/limiter/system"
)

// A queued call is forwarded when its wait ends, so that is when its
// maxQps pass counts: no real second forwards more than maxQps calls, the
// waiting ones included (SPEC §3, Grades). Counted at its entry, the pass
// of a call that waited 1.5 s left the window before the call was sent.
func TestQueuedCallPassCountsWhenForwarded(t *testing.T) {
	const s = 1000 * ms
	g := system.New(config.System{MaxQps: 1}, nil, nil)

	a, v := g.Enter(0)
	if v.Blocked {
		t.Fatal("first call blocked")
	}
	a.Queue()
	if v := a.Resume(s + s/2); v.Blocked {
		t.Fatal("resumed at 1.5 s with an empty window: blocked")
	}
	if _, v := g.Enter(2 * s); !v.Blocked {
		t.Fatal("a call at 2 s passed: the queued call forwarded at 1.5 s was counted at 0 s, 2 in one second")
	}
	if _, v := g.Enter(s + s/2 + s); v.Blocked {
		t.Fatal("a call at 2.5 s (1 s after the forward) blocked")
	}

	// A window full when the wait ends refuses the queued call, and its
	// Cancel takes back no other call's pass.
	g = system.New(config.System{MaxQps: 1}, nil, nil)
	a, _ = g.Enter(0)
	a.Queue()
	b, v := g.Enter(s + s/5) // a's entry pass left at 1 s
	if v.Blocked {
		t.Fatal("b at 1.2 s blocked")
	}
	if v := a.Resume(s + s/2); !v.Blocked {
		t.Fatal("a resumed at 1.5 s, with b forwarded at 1.2 s: 2 in one second")
	}
	a.Cancel(s + s/2)
	if _, v := g.Enter(s + 3*s/5); !v.Blocked {
		t.Fatal("a call at 1.6 s passed: a's Cancel took back b's pass")
	}
	b.Exit(s+s/2, false)
}

// TestQueuedCallsPassProperty: the promise of TestQueuedCallPassCountsWhenForwarded
// swept over limits, overloads and start phases, with every third passed
// call waiting 0 to 1.5 s before it is forwarded (a throttle queue, a
// prioritized pass): no real second forwards more than maxQps calls,
// waiting ones included.
func TestQueuedCallsPassProperty(t *testing.T) {
	type event struct {
		at  int64
		tok *system.Token // nil: a new call arrives
	}
	for _, limit := range []float64{1, 2, 3, 7, 50, 1000} {
		for _, over := range []float64{1.5, 3} {
			for ph := int64(0); ph < 1000; ph += phaseStepMs {
				g := system.New(config.System{MaxQps: limit}, nil, nil)
				start := int64(1e12) + ph*ms
				step := float64(sec) / (limit * over)
				// events in time order: arrivals, and the ends of waits
				var queue []event
				for i := int64(0); ; i++ {
					at := start + int64(float64(i)*step)
					if at >= start+4*sec {
						break
					}
					queue = append(queue, event{at: at})
				}
				var forwarded []int64
				for n := 0; len(queue) > 0; n++ {
					e := queue[0]
					queue = queue[1:]
					if e.tok != nil {
						if v := e.tok.Resume(e.at); v.Blocked {
							e.tok.Cancel(e.at)
							continue
						}
						forwarded = append(forwarded, e.at)
						e.tok.Exit(e.at, false)
						continue
					}
					tok, v := g.Enter(e.at)
					if v.Blocked {
						continue
					}
					if n%3 != 0 {
						forwarded = append(forwarded, e.at)
						tok.Exit(e.at, false)
						continue
					}
					tok.Queue()
					end := e.at + int64(n*7919%1500)*ms
					i := 0
					for i < len(queue) && queue[i].at <= end {
						i++
					}
					queue = append(queue[:i], append([]event{{at: end, tok: &tok}}, queue[i:]...)...)
				}
				slices.Sort(forwarded)
				if got := passcheck.MostInInterval(forwarded, sec); got > int(limit) {
					t.Fatalf("maxQps %g, overload %gx, phase %d ms: %d calls forwarded in one real second", limit, over, ph, got)
				}
				if len(forwarded) == 0 {
					t.Fatalf("maxQps %g: nothing forwarded", limit)
				}
			}
		}
	}
}
