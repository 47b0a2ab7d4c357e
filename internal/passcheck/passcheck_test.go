package passcheck_test

import (
	"slices"
	"testing"

	"sluice/internal/passcheck"
)

func TestMostInInterval(t *testing.T) {
	for _, tc := range []struct {
		name   string
		passes []int64
		length int64
		want   int
	}{
		{"none", nil, 10, 0},
		{"one", []int64{5}, 10, 1},
		{"the interval is half open: a pass at s+length is not in it", []int64{0, 10}, 10, 1},
		{"just inside", []int64{0, 9}, 10, 2},
		{"the most is not at the start", []int64{0, 20, 21, 22, 29, 30}, 10, 4},
		{"equal times", []int64{3, 3, 3}, 1, 3},
	} {
		if got := passcheck.MostInInterval(tc.passes, tc.length); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// Offer paces calls at a step that does not divide the span and passes
// every other one.
func TestOffer(t *testing.T) {
	var calls []int64
	got := passcheck.Offer(100, 110, 2.5, func(i, at int64) bool {
		calls = append(calls, at)
		return i%2 == 0
	})
	if want := []int64{100, 102, 105, 107}; !slices.Equal(calls, want) {
		t.Errorf("calls at %v, want %v", calls, want)
	}
	if want := []int64{100, 105}; !slices.Equal(got, want) {
		t.Errorf("passed %v, want %v", got, want)
	}
}
