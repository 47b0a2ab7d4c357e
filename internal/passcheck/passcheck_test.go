package passcheck_test

import (
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
