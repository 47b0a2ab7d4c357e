package ring

import (
	"math"
	"testing"
)

// TestCoarse steps a Coarse of 60-unit buckets through synthetic instants:
// after each add (n 0: only read) the estimates must be want.
func TestCoarse(t *testing.T) {
	type step struct {
		at    int64
		i     int
		n     uint32
		wantA float64
		wantB float64
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"counts in one bucket are exact", []step{{0, 0, 3, 3, 0}, {30, 1, 2, 3, 2}, {59, 1, 1, 3, 3}}},
		{"the older bucket is weighted by what is left of it", []step{{10, 1, 4, 0, 4}, {60, 0, 0, 0, 4}, {90, 0, 0, 0, 2}, {105, 1, 1, 0, 2}}},
		{"two buckets later nothing is left", []step{{10, 1, 4, 0, 4}, {120, 0, 0, 0, 0}, {130, 0, 1, 1, 0}}},
		{"a late instant counts in the current bucket", []step{{70, 0, 1, 1, 0}, {10, 0, 1, 2, 0}, {70, 0, 0, 2, 0}}},
		{"negative instants", []step{{-30, 0, 2, 2, 0}, {0, 0, 0, 2, 0}, {30, 0, 0, 1, 0}}},
		{"far from the origin", []step{{math.MaxInt64 - 10, 1, 5, 0, 5}, {math.MaxInt64 - 8, 1, 0, 0, 5}, {math.MaxInt64 - 1, 1, 0, 0, 4.5}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w Coarse
			for j, s := range c.steps {
				if s.n > 0 {
					w.Add(s.at, 60, s.i, s.n)
				}
				a, b := w.Sum(s.at, 60)
				if math.Abs(a-s.wantA) > 1e-9 || math.Abs(b-s.wantB) > 1e-9 {
					t.Fatalf("step %d at %d: sums %v, %v; want %v, %v", j, s.at, a, b, s.wantA, s.wantB)
				}
			}
		})
	}
}

func TestCoarseSaturates(t *testing.T) {
	var w Coarse
	w.Add(0, 60, 1, math.MaxUint32-1)
	w.Add(0, 60, 1, 5)
	if _, b := w.Sum(0, 60); b != math.MaxUint32 {
		t.Fatalf("sum %v, want %v (saturated, not wrapped)", b, uint32(math.MaxUint32))
	}
}
