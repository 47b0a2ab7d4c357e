package system_test

import (
	"fmt"
	"math"
	"testing"

	"sluice/config"
	"sluice/internal/passcheck"
	"sluice/limiter/system"
)

// A maxQps under 1 is a slow limit, not "off" and not "block everything": as
// a flow rule's qps count under one, it passes one call per the fewest whole
// seconds that hold one (0.5: one every 2 s; 0.3: 1.2 in 4 s, so one every
// 4 s). A client keeping to that pace always passes; a call sooner than that
// after a pass is refused, to the nanosecond.
func TestMaxQpsUnderOne(t *testing.T) {
	for _, tt := range []struct {
		maxQps float64
		every  int64 // the pace one pass a window allows
	}{
		{0.5, 2 * sec},
		{0.25, 4 * sec},
		{0.3, 4 * sec},
		{0.9, 2 * sec},
		{1.5, 1 * sec}, // from 1 up the window stays one second of whole calls
	} {
		t.Run(fmt.Sprintf("maxQps=%g", tt.maxQps), func(t *testing.T) {
			start := int64(1e12) + 123*ms
			g := system.New(config.System{MaxQps: tt.maxQps}, nil, nil)
			for i := range int64(10) {
				at := start + i*tt.every
				if i > 0 {
					if _, v := g.Enter(at - 1); !v.Blocked {
						t.Fatalf("call %d, 1 ns before its turn: passed; want blocked", i)
					}
				}
				tok, v := g.Enter(at)
				if v.Blocked {
					t.Fatalf("call %d, on its turn (every %d ms): blocked", i, tt.every/ms)
				}
				tok.Exit(at+ms, false)
			}
		})
	}
}

// A reload between a limit under 1 and one above keeps the passes already
// made: after maxQps 5 passed 5 calls, maxQps 0.5 (one in any 2 s) refuses
// until 2 s after the newest of them, and back at 5 the pass made under 0.5
// still counts.
func TestMaxQpsReloadAcrossOne(t *testing.T) {
	start := int64(1e12)
	g := system.New(config.System{MaxQps: 5}, nil, nil)
	for i := range int64(5) {
		tok, v := g.Enter(start + i*100*ms)
		if v.Blocked {
			t.Fatalf("call %d blocked under maxQps 5", i)
		}
		tok.Exit(start+i*100*ms, false)
	}
	g = system.New(config.System{MaxQps: 0.5}, g, nil)
	newest := start + 400*ms
	if _, v := g.Enter(newest + 2*sec - 1); !v.Blocked {
		t.Fatalf("maxQps 0.5, 1 ns before 2 s after the last pass: passed; want blocked")
	}
	tok, v := g.Enter(newest + 2*sec)
	if v.Blocked {
		t.Fatalf("maxQps 0.5, 2 s after the last pass: blocked")
	}
	tok.Exit(newest+2*sec, false)
	g = system.New(config.System{MaxQps: 5}, g, nil)
	at := newest + 2*sec + 10*ms
	for i := range 4 {
		tok, v := g.Enter(at)
		if v.Blocked {
			t.Fatalf("back at maxQps 5: call %d blocked", i)
		}
		tok.Exit(at, false)
	}
	if _, v := g.Enter(at); !v.Blocked {
		t.Errorf("back at maxQps 5: a sixth call in the second passed (the pass made under 0.5 was forgotten)")
	}
}

// Property: a maxQps under 1 keeps the window's promise at every limit,
// overload and start phase. The window is the fewest whole seconds m that
// hold a pass, and it holds floor(m × maxQps) passes: no real interval of
// m seconds passes more, and a steady overload passes exactly that many
// per m seconds (the last window of the run may be cut short). Swept over
// limits 0.05 to 0.95 (and 1/3, 0.999), overloads 1.5x to 10x the pace
// the window allows, and 7 start phases across the window.
func TestMaxQpsUnderOneProperty(t *testing.T) {
	limits := []float64{1.0 / 3, 0.999}
	for q := 0.05; q < 0.96; q += 0.05 {
		limits = append(limits, q)
	}
	for _, q := range limits {
		m := math.Ceil(1 / q)
		window, most := int64(m)*sec, int(math.Floor(m*q+1e-9))
		for _, over := range []float64{1.5, 3, 10} {
			for ph := int64(0); ph < window; ph += window / 7 {
				start := int64(1e12) + ph
				const windows = 6
				g := system.New(config.System{MaxQps: q}, nil, nil)
				passed := passcheck.Offer(start, start+windows*window, float64(window)/(over*float64(most)), func(_, at int64) bool {
					tok, v := g.Enter(at)
					if !v.Blocked {
						tok.Exit(at, false)
					}
					return !v.Blocked
				})
				what := fmt.Sprintf("maxQps %g (%d in %d s), %gx, phase %d ms", q, most, int64(m), over, ph/ms)
				if got := passcheck.MostInInterval(passed, window); got > most {
					t.Fatalf("%s: a real %d s passed %d, want at most %d", what, int64(m), got, most)
				}
				if len(passed) < (windows-1)*most {
					t.Fatalf("%s: %d passed in %d windows under overload, want at least %d", what, len(passed), windows, (windows-1)*most)
				}
			}
		}
	}
}
