package system_test

import (
	"fmt"
	"testing"

	"sluice/config"
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
