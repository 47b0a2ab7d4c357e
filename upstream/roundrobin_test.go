package upstream_test

import (
	"testing"

	"sluice/upstream"
)

// TestSmoothWeightedOrder: weights 5,1,1 are served as nginx serves them,
// a a b a c a a, not in a burst of a.
func TestSmoothWeightedOrder(t *testing.T) {
	_, u := build(t, upstream.Spec{Targets: targets(3, 5, 1, 1)}, nil)
	want := []int{0, 0, 1, 0, 2, 0, 0}
	for round := range 3 {
		for j, w := range want {
			if got := pick(u, 0, 200); got != w {
				t.Fatalf("round %d pick %d: target %d, want %d", round, j, got, w)
			}
		}
	}
}

// TestRoundRobinWeights: over any whole number of cycles every target gets
// exactly its weight; a target that is ejected gets nothing and the others
// share its turns by their weights.
func TestRoundRobinWeights(t *testing.T) {
	cases := []struct {
		weights []int
		ejected int // -1: none
		want    []int
	}{
		{[]int{1, 1}, -1, []int{500, 500}},
		{[]int{1, 3}, -1, []int{250, 750}},
		{[]int{2, 3, 5}, -1, []int{200, 300, 500}},
		{[]int{2, 3, 5}, 2, []int{400, 600, 0}},
	}
	for _, c := range cases {
		s := upstream.Spec{Targets: targets(len(c.weights), c.weights...)}
		if c.ejected >= 0 {
			s.Passive = &upstream.Passive{ConsecutiveFailures: 1, EjectFor: 3600e9, MaxEjectedPercent: 100}
		}
		_, u := build(t, s, nil)
		if c.ejected >= 0 {
			var tried upstream.Tries
			for i := u.Pick(0, 0, false, &tried); i != c.ejected; i = u.Pick(0, 0, false, &tried) {
				u.Done(0, &tried, 200, upstream.Success)
				tried = upstream.Tries{}
			}
			u.Done(0, &tried, 503, upstream.Failure)
		}
		got := make([]int, len(c.weights))
		for range 1000 {
			got[pick(u, 1, 200)]++
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("weights %v ejected %d: got %v, want %v", c.weights, c.ejected, got, c.want)
				break
			}
		}
	}
}
