package limiter

import (
	"math/rand/v2"
	"testing"
)

// The multiply-and-correct epoch equals floor division everywhere.
func TestWindowEpochIsFloorDiv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, iv := range []int64{1e6, 1e9, 60e9, 3e6 + 50, 86400e9} {
		w := newWindow(iv, false)
		for range 100000 {
			now := rng.Int64N(1<<62) - 1<<61
			if rng.IntN(2) == 0 {
				now = rng.Int64N(1 << 45)
			}
			for _, x := range []int64{now, now - now%w.width, now - now%w.width - 1} {
				if got, want := w.epoch(x), floorDiv(x, w.width); got != want {
					t.Fatalf("width %d now %d: epoch %d, want %d", w.width, x, got, want)
				}
			}
		}
	}
}
