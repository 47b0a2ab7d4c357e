package window_test

import (
	"testing"

	"sluice/limiter/window"
)

// A grouped window (a limit above MaxSlots) counts its very first token in
// its slot too: once every pass has left it is empty and passes its whole
// limit again. The first token of an empty grouped window used to be counted
// in the total only, so the window counted one phantom pass for ever and
// every later interval passed one call less.
func TestExactGroupedFirstTokenLeaves(t *testing.T) {
	for _, limit := range []int64{window.MaxSlots + 1, 3000, 100000} {
		w := window.NewExact(sec, float64(limit))
		var r window.Result
		for round := range int64(3) {
			at := t0 + round*sec
			for i := range limit {
				if !w.TryAdd(at, 1, float64(limit), false, &r) {
					t.Fatalf("limit %d, round %d: call %d refused", limit, round, i)
				}
			}
			if w.TryAdd(at, 1, float64(limit), false, &r) {
				t.Fatalf("limit %d, round %d: call %d passed", limit, round, limit+1)
			}
		}
		if got := w.Total(t0 + 10*sec); got != 0 {
			t.Errorf("limit %d: %d tokens left after every pass left, want 0", limit, got)
		}
	}
}
