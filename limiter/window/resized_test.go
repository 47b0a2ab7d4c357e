package window_test

import (
	"fmt"
	"testing"

	"sluice/limiter/window"
)

// spread lays out up to count passes offered before the resize at end: the
// times of the calls offered to the old window, in order.
type spread struct {
	name string
	at   func(count int64, iv, end int64) []int64
}

var spreads = []spread{
	{"at once", func(c, iv, end int64) []int64 { return evenly(c, end, end) }},
	{"over the interval", func(c, iv, end int64) []int64 { return evenly(c, end-iv+1, end) }},
	{"over its last tenth", func(c, iv, end int64) []int64 { return evenly(c, end-iv/10, end) }},
	{"3x over two intervals", func(c, iv, end int64) []int64 { return evenly(6*c, end-2*iv+1, end) }},
	{"bursts", func(c, iv, end int64) []int64 {
		// uneven gaps from a fixed LCG: clusters and holes
		var at []int64
		x, t := uint64(12345), end-iv
		for range 2 * c {
			x = x*6364136223846793005 + 1442695040888963407
			t += int64(x>>33) % (2 * iv / max(c, 1))
			at = append(at, min(t, end))
		}
		return at
	}},
}

// evenly is n instants from a to b, both included when n > 1.
func evenly(n, a, b int64) []int64 {
	at := make([]int64, n)
	for i := range n {
		if n > 1 {
			at[i] = a + (b-a)*i/(n-1)
		} else {
			at[i] = b
		}
	}
	return at
}

// A limit that changes on a reload (window.Exact.Resized) decides the next
// calls exactly as if the window had always held every pass made: it keeps
// the newest passes, the ones still in the window longest, so lowering the
// limit refuses calls until the real last interval has room, and raising it
// lets through exactly the difference. Swept over old and new limits, the
// spread of the passes before the reload and a new interval (a maxQps under
// 1 makes it longer); then 3x the new limit is offered for two intervals and
// every decision compared with the brute-force model.
func TestResizedKeepsTheNewestPasses(t *testing.T) {
	olds := []int64{1, 3, 10, 100, 1000}
	news := []int64{1, 2, 5, 10, 100, 1000}
	for _, oldC := range olds {
		for _, newC := range news {
			t.Run(fmt.Sprintf("%d->%d", oldC, newC), func(t *testing.T) {
				t.Parallel()
				for _, sp := range spreads {
					for _, ivMul := range []int64{1, 2} {
						resizeMatchesModel(t, oldC, newC, sp, sec, ivMul*sec)
					}
					resizeMatchesModel(t, oldC, newC, sp, sec, sec/2)
				}
			})
		}
	}
}

func resizeMatchesModel(t *testing.T, oldC, newC int64, sp spread, oldIv, newIv int64) {
	t.Helper()
	end := t0
	w := window.NewExact(oldIv, float64(oldC))
	var r window.Result
	// The model knows the passes the old window can know of: those in its
	// interval at the reload.
	m := &model{interval: newIv, limit: newC}
	for _, at := range sp.at(oldC, oldIv, end) {
		if w.TryAdd(at, 1, float64(oldC), false, &r) && at > end-oldIv {
			m.times, m.ns = append(m.times, at), append(m.ns, 1)
			m.live++
		}
	}
	nw := w.Resized(newIv, float64(newC))
	if nw.Interval() != newIv {
		t.Fatalf("interval %d, want %d", nw.Interval(), newIv)
	}
	step := max(newIv/(3*newC), 1)
	for at := end; at < end+2*newIv; at += step {
		got := nw.TryAdd(at, 1, float64(newC), false, &r)
		if want := m.try(at, 1); got != want {
			t.Fatalf("%s, iv %d->%d ms: +%d us after the reload: passed %v, want %v (window holds %d, the real interval %d)",
				sp.name, oldIv/ms, newIv/ms, (at-end)/1000, got, want, nw.Total(at), m.live)
		}
	}
}

// Above MaxSlots a window groups tokens in slots; a resize into or out of
// groups still keeps the newest passes, at worst a group fewer than the
// limit: it never lets a real interval hold more than the new limit, and
// holds at least the new limit's worth of passes where there were as many.
func TestResizedGrouped(t *testing.T) {
	for _, tt := range []struct{ oldC, newC int64 }{
		{5000, 10}, {5000, 3000}, {3000, 5000}, {100, 5000}, {100000, 2000},
	} {
		t.Run(fmt.Sprintf("%d->%d", tt.oldC, tt.newC), func(t *testing.T) {
			end := t0
			w := window.NewExact(sec, float64(tt.oldC))
			var r window.Result
			var times, ns []int64
			for _, at := range evenly(tt.oldC, end-sec+1, end) {
				if w.TryAdd(at, 1, float64(tt.oldC), false, &r) {
					times, ns = append(times, at), append(ns, 1)
				}
			}
			held := int64(len(times))
			nw := w.Resized(sec, float64(tt.newC))
			if got, want := nw.Total(end), min(held, tt.newC); got < want {
				t.Fatalf("holds %d after the resize, want at least %d", got, want)
			}
			// Every pass after the resize found room in the real second
			// before it, the passes made before the resize included.
			step := max(sec/(3*tt.newC), 1)
			from := 0 // the oldest pass in the real second
			for at := end; at < end+2*sec; at += step {
				if !nw.TryAdd(at, 1, float64(tt.newC), false, &r) {
					continue
				}
				times, ns = append(times, at), append(ns, 1)
				for times[from] <= at-sec {
					from++
				}
				if in := int64(len(times) - from); in > tt.newC {
					t.Fatalf("+%d us: passed with %d passes in the real second, over the new limit %d", (at-end)/1000, in, tt.newC)
				}
			}
		})
	}
}
