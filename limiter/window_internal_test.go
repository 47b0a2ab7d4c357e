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
			// in the window: the current bucket and the windowBuckets before it
			for len(model) > 5 && model[0].epoch <= e-ringSize {
				model = model[1:]
			}
			var inWindow int64
			for _, p := range model {
				if p.epoch > e-ringSize && p.epoch <= e {
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

// A window counts from its first call whatever the epoch's low 32 bits (a new
// rule or origin after a long uptime: at 1 ms statIntervalMs the bit 2^31 is
// reached after 12 h), and after an idle spell of more than 2^31 buckets its
// stale buckets count as expired. Before, an untouched (zero) bucket looked
// newer than any epoch with bit 31 set, so such a window counted nothing and
// never limited.
func TestWindowCountsAtAnyEpoch(t *testing.T) {
	tests := []struct {
		name      string
		first     int64 // epoch of the first calls
		idle      int64 // buckets idle after them, 0: none
		wantFirst int64 // total after 10 calls of 1 at first
	}{
		{"low bits 0", 5 << 32, 0, 10},
		{"low bits 2^31-1", 5<<32 + 1<<31 - 1, 0, 10},
		{"low bits 2^31", 5<<32 + 1<<31, 0, 10},
		{"low bits 2^32-1", 5<<32 + 1<<32 - 1, 0, 10},
		{"idle 2^31+7 buckets", 5 << 32, 1<<31 + 7, 10},
		{"idle 2^32-2^21 buckets", 5<<32 + 3, 1<<32 - 1<<21, 10},
	}
	for _, tt := range tests {
		w := newWindow(1e9, true)
		at := func(e int64) int64 { return e*w.width + w.width/2 }
		var total int64
		for range 10 {
			total, _ = w.add(at(tt.first), 1)
		}
		if total != tt.wantFirst || w.sum(at(tt.first)) != tt.wantFirst {
			t.Errorf("%s: total %d, scanned %d after 10 calls, want %d", tt.name, total, w.sum(at(tt.first)), tt.wantFirst)
		}
		if tt.idle == 0 {
			continue
		}
		now := at(tt.first + tt.idle)
		if total, _ = w.add(now, 1); total != 1 || w.sum(now) != 1 {
			t.Errorf("%s: first call after idle sees total %d, scanned %d, want 1", tt.name, total, w.sum(now))
		}
	}
}
