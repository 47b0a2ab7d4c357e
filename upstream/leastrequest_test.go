package upstream_test

import (
	"math"
	"testing"

	"sluice/upstream"
)

// TestLeastRequestIdleFollowsWeights: with nothing in flight the two draws
// tie, so traffic follows the weights.
func TestLeastRequestIdleFollowsWeights(t *testing.T) {
	_, u := build(t, upstream.Spec{Targets: targets(3, 1, 2, 5), Balance: upstream.LeastRequest}, nil)
	const n = 80000
	got := make([]int, 3)
	for range n {
		got[pick(u, 0, 200)]++
	}
	for i, w := range []float64{1, 2, 5} {
		want := n * w / 8
		if math.Abs(float64(got[i])-want) > 0.03*want {
			t.Errorf("target %d: %d picks, want %.0f ±3%% (all: %v)", i, got[i], want, got)
		}
	}
}

// TestLeastRequestAvoidsLoaded: a target with requests piling up (a slow
// one) gets a new request only when it is no busier per unit of weight
// than the other.
func TestLeastRequestAvoidsLoaded(t *testing.T) {
	_, u := build(t, upstream.Spec{Targets: targets(2, 1, 1), Balance: upstream.LeastRequest}, nil)
	// Hold one request on target 0.
	var held upstream.Tries
	for {
		held = upstream.Tries{}
		if i := u.Pick(0, 0, false, &held); i == 0 {
			break
		}
		u.Done(0, &held, 200, upstream.Success)
	}
	for range 1000 {
		if got := pick(u, 0, 200); got != 1 {
			t.Fatalf("picked the target with a request in flight over the idle one")
		}
	}
	u.Done(0, &held, 200, upstream.Success)
	// Weight 4 vs 1: 3 in flight on the heavy one (0.75 a unit) is still
	// less loaded than 1 on the light one (1 a unit).
	_, u = build(t, upstream.Spec{Targets: targets(2, 4, 1), Balance: upstream.LeastRequest}, nil)
	for heavy, light := 0, 0; heavy < 3 || light < 1; {
		var tried upstream.Tries
		switch i := u.Pick(0, 0, false, &tried); {
		case i == 0 && heavy < 3:
			heavy++
		case i == 1 && light < 1:
			light++
		default:
			u.Done(0, &tried, 200, upstream.Success)
		}
	}
	for range 1000 {
		if got := pick(u, 0, 200); got != 0 {
			t.Fatalf("picked the light target (1 in flight, weight 1) over the heavy one (3 in flight, weight 4)")
		}
	}
}
