package system_test

import (
	"fmt"
	"testing"

	"sluice/config"
	"sluice/limiter/system"
)

// A reload that lowers maxQps counts the last second's passes, the newest
// ones: after 100 passes spread over a second, maxQps 5 refuses every call
// until only 4 of them are left in the sliding second. A guard that kept the
// oldest passes instead would see them leave at once and let the gateway
// pass again while the real last second holds ~90.
func TestMaxQpsReloadDownKeepsNewestPasses(t *testing.T) {
	for _, tt := range []struct {
		from, to float64
		passes   int64 // under from, one every 1 s / passes
		late     int64 // passes the opening may lag: a grouped window stamps a group at its last
	}{
		{100, 5, 100, 0},
		{100, 1, 100, 0},
		{10, 3, 10, 0},
		{2000, 10, 2000, 1}, // above window.MaxSlots the old window holds passes in pairs
	} {
		t.Run(fmt.Sprintf("%g->%g", tt.from, tt.to), func(t *testing.T) {
			start := int64(1e12)
			step := sec / tt.passes
			g := system.New(config.System{MaxQps: tt.from}, nil, nil)
			for i := range tt.passes {
				at := start + i*step
				tok, v := g.Enter(at)
				if v.Blocked {
					t.Fatalf("call %d blocked under maxQps %g", i, tt.from)
				}
				tok.Exit(at, false)
			}
			g = system.New(config.System{MaxQps: tt.to}, g, nil)
			// The next call passes once the pass that leaves only to-1 in
			// the window has left: the to-th newest, at (passes-to)*step.
			open := start + (tt.passes-int64(tt.to)+tt.late)*step + sec
			for _, at := range []int64{start + sec, start + sec + sec/10, open - 1} {
				if at >= open {
					continue
				}
				if _, v := g.Enter(at); !v.Blocked {
					t.Fatalf("+%d ms: passed; want blocked until +%d ms (the last second's passes were forgotten)", (at-start)/ms, (open-start)/ms)
				}
			}
			if tok, v := g.Enter(open); v.Blocked {
				t.Errorf("+%d ns: blocked; want passed (only %g-1 passes left in the second)", open-start, tt.to)
			} else {
				tok.Exit(open, false)
			}
		})
	}
}
