package upstream_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"sluice/upstream"
)

// owners maps each of n keys to the URL of its target.
func owners(t *testing.T, ts []upstream.Target, n int) []string {
	t.Helper()
	_, u := build(t, upstream.Spec{Targets: ts, Balance: upstream.Hash}, nil)
	out := make([]string, n)
	for k := range out {
		var tried upstream.Tries
		i := u.Pick(0, upstream.HashKey(fmt.Sprintf("user-%d", k)), true, &tried)
		u.Done(0, &tried, 200, upstream.Success)
		out[k] = ts[i].URL
	}
	return out
}

// TestHashMovesAboutOneNth: over 10,000 keys, adding a target to N moves at
// most 1/N + 5% of the keys (only to the new target), removing one moves
// only that target's keys, and each target's share is near its weight;
// with weights of 1, and of 100 or 1000 each (weights written as
// percentages or per mille), whose sum once thinned every target's points
// and moved about 9% of the keys between the old targets.
func TestHashMovesAboutOneNth(t *testing.T) {
	const keys = 10000
	for _, w := range []int{1, 100, 1000} {
		for _, n := range []int{2, 3, 5, 10} {
			t.Run(fmt.Sprintf("weight %d, %d targets", w, n), func(t *testing.T) {
				ws := make([]int, n+1)
				for i := range ws {
					ws[i] = w
				}
				hashJoinMovesOnlyItsShare(t, ws, keys)
			})
		}
	}
}

// TestHashWeightsMoveOnlyTheChangedTargetsKeys: with any weights, a target
// joining takes keys from the others and moves none between them, about
// its weight's share; one leaving gives up only its own keys; every
// target's share is near its weight's. A ring counted in units of the
// weights' greatest common divisor moved 20% of the keys between the two
// old targets of weights 2 and 2 when one of weight 1 joined (the unit
// went from 2 to 1, doubling their points), and 14% for 100, 200 + 150.
func TestHashWeightsMoveOnlyTheChangedTargetsKeys(t *testing.T) {
	const keys = 20000
	rnd := rand.New(rand.NewPCG(1, 2))
	sets := [][]int{{2, 2, 1}, {100, 200, 150}, {1, 1000}, {1000, 1}, {3, 5, 7, 11}, {999, 1000, 1000}}
	for range 6 {
		ws := make([]int, 2+rnd.IntN(6))
		for i := range ws {
			ws[i] = 1 + rnd.IntN(1000) // config.MaxTargetWeight
		}
		sets = append(sets, ws)
	}
	for _, ws := range sets {
		t.Run(fmt.Sprint(ws), func(t *testing.T) { hashJoinMovesOnlyItsShare(t, ws, keys) })
	}
}

// hashJoinMovesOnlyItsShare checks the targets of weights ws, and the same
// without the last one, over keys keys: the last one joining moves keys
// only to it, about its share (and leaving, back), and each target's share
// of the keys is its weight's, within 15% of it (and 1% of the keys).
func hashJoinMovesOnlyItsShare(t *testing.T, ws []int, keys int) {
	t.Helper()
	n := len(ws) - 1
	before := owners(t, targets(n, ws[:n]...), keys)
	after := owners(t, targets(n+1, ws...), keys)
	newURL := targets(n + 1)[n].URL
	for k := range before {
		if before[k] != after[k] {
			if after[k] != newURL {
				t.Fatalf("weights %v: key %d moved between old targets (%s -> %s) when %s joined", ws, k, before[k], after[k], newURL)
			}
		}
	}
	sum := 0
	for _, w := range ws {
		sum += w
	}
	share := map[string]int{}
	for _, o := range after {
		share[o]++
	}
	for i, tg := range targets(n+1, ws...) {
		want := float64(keys) * float64(ws[i]) / float64(sum)
		if got := float64(share[tg.URL]); math.Abs(got-want) > want*0.15+float64(keys)/100 {
			t.Errorf("weights %v: %s (weight %d) owns %.0f keys, want %.0f", ws, tg.URL, ws[i], got, want)
		}
	}
}

// TestHashKeepsKeysOfAvailableTargets: while a target is ejected its keys go
// to others, the other keys stay where they were, and they all come back.
func TestHashKeepsKeysOfAvailableTargets(t *testing.T) {
	ts := targets(4)
	_, u := build(t, upstream.Spec{Targets: ts, Balance: upstream.Hash,
		Passive: &upstream.Passive{ConsecutiveFailures: 1, EjectFor: 10e9, MaxEjectedPercent: 50}}, nil)
	at := func(now int64, k int) int {
		var tried upstream.Tries
		i := u.Pick(now, upstream.HashKey(fmt.Sprint(k)), true, &tried)
		u.Done(now, &tried, 200, upstream.Success)
		return i
	}
	before := make([]int, 1000)
	for k := range before {
		before[k] = at(0, k)
	}
	var tried upstream.Tries
	i := u.Pick(0, upstream.HashKey("0"), true, &tried)
	u.Done(0, &tried, 0, upstream.Failure) // ejects the owner of key "0"
	for k, b := range before {
		got := at(1, k)
		if b == i && got == i {
			t.Fatalf("key %d still sent to the ejected target", k)
		}
		if b != i && got != b {
			t.Fatalf("key %d moved from %d to %d while another target was ejected", k, b, got)
		}
	}
	for k, b := range before {
		if got := at(11*sec, k); got != b {
			t.Fatalf("key %d on %d after the ejection ended, want %d", k, got, b)
		}
	}
}
