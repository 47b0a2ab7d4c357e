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

// The lock-free window with its running total decides exactly like a plain
// model that keeps every pass with its bucket, over random steps, gaps and
// rollbacks.
func TestWindowMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, iv := range []int64{1e6, 1e9, 60e9} {
		w := newWindow(iv, false)
		type pass struct{ epoch, n, at int64 }
		var model []pass
		now := int64(1e15) + rng.Int64N(iv)
		limit := int64(1 + rng.IntN(200))
		for step := range 50000 {
			switch rng.IntN(10) {
			case 0:
				now += rng.Int64N(2 * iv) // gaps, some longer than the window
			default:
				now += rng.Int64N(iv / 100)
			}
			e := w.epoch(now)
			for len(model) > 5 && model[0].epoch <= e-windowBuckets {
				model = model[1:]
			}
			var inWindow int64
			for _, p := range model {
				if p.epoch > e-windowBuckets && p.epoch <= e {
					inWindow += p.n
				}
			}
			n := 1 + rng.Int64N(3)
			total, _ := w.add(now, n)
			want := inWindow+n <= limit
			if got := total <= limit; got != want {
				t.Fatalf("interval %d step %d: window total %d, model %d+%d, limit %d", iv, step, total, inWindow, n, limit)
			}
			if !want {
				w.sub(now, n)
				continue
			}
			model = append(model, pass{e, n, now})
			if rng.IntN(20) == 0 { // roll back a recent pass
				i := len(model) - 1 - rng.IntN(min(len(model), 5))
				p := model[i]
				w.sub(p.at, p.n)
				model = append(model[:i], model[i+1:]...)
			}
			if s := w.sum(now); s != w.total.Load() && w.swept.Load() == e {
				t.Fatalf("interval %d step %d: running total %d, scanned %d", iv, step, w.total.Load(), s)
			}
		}
	}
}
