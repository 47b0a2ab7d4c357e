package limiter_test

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPassModelFitsEveryInterval checks the judge of the property sweeps
// against its definition, on small random sets of passes: one more pass at
// at fits when every interval [s, s+iv) that would hold it, for every s,
// holds at most limit.
func TestPassModelFitsEveryInterval(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		iv, limit := 1+rng.Int64N(12), 1+rng.Int64N(5)
		m := passModel{iv: iv, limit: limit}
		for range rng.IntN(12) {
			m.add(rng.Int64N(30)) // often equal passes
		}
		at := rng.Int64N(34) - 2
		want := true
		for s := at - iv + 1; s <= at; s++ {
			lo, _ := slices.BinarySearch(m.at, s)
			hi, _ := slices.BinarySearch(m.at, s+iv)
			if int64(hi-lo)+1 > limit {
				want = false
			}
		}
		if got := m.fits(at); got != want {
			t.Fatalf("passes %v, interval %d, limit %d: fits(%d) = %v, want %v", m.at, iv, limit, at, got, want)
		}
	}
}
