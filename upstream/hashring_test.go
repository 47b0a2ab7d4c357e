package upstream_test

import (
	"fmt"
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
				hashMovesAboutOneNth(t, n, w, keys)
			})
		}
	}
}

func hashMovesAboutOneNth(t *testing.T, n, w, keys int) {
	weights := func(n int) []int {
		ws := make([]int, n)
		for i := range ws {
			ws[i] = w
		}
		return ws
	}
	{
		before := owners(t, targets(n, weights(n)...), keys)
		after := owners(t, targets(n+1, weights(n+1)...), keys)
		newURL := targets(n + 1)[n].URL
		moved := 0
		for k := range before {
			if before[k] != after[k] {
				moved++
				if after[k] != newURL {
					t.Fatalf("n=%d: key %d moved between old targets (%s -> %s)", n, k, before[k], after[k])
				}
			}
		}
		if limit := keys/n + keys/20; moved > limit {
			t.Errorf("adding a target to %d moved %d of %d keys, want <= %d (1/N + 5%%)", n, moved, keys, limit)
		}
		share := map[string]int{}
		for _, o := range before {
			share[o]++
		}
		for url, c := range share {
			if want := keys / n; c < want*80/100 || c > want*120/100 {
				t.Errorf("n=%d: %s owns %d keys, want %d ±20%%", n, url, c, want)
			}
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
