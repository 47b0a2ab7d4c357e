package upstream_test

import (
	"fmt"
	"testing"

	"sluice/upstream"
)

var balances = []upstream.Balance{upstream.RoundRobin, upstream.LeastRequest, upstream.Hash}

// benchUpstream is a 4-target weighted upstream with passive ejection on,
// as a busy route would have it.
func benchUpstream(t testing.TB, b upstream.Balance) *upstream.Upstream {
	_, u := build(t, upstream.Spec{Targets: targets(4, 1, 2, 3, 4), Balance: b, Retries: 1, RetryBudget: 0.2,
		Passive: &upstream.Passive{ConsecutiveFailures: 5, EjectFor: 30e9, MaxEjectedPercent: 50}}, nil)
	return u
}

// BenchmarkPick is one request's target choice and its report (Pick and
// Done), per balance mode; it must not allocate.
func BenchmarkPick(b *testing.B) {
	for _, bal := range balances {
		b.Run(bal.String(), func(b *testing.B) {
			u := benchUpstream(b, bal)
			key := upstream.HashKey("user-42")
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				now := int64(0)
				for pb.Next() {
					now += 1000
					var tried upstream.Tries
					u.Pick(now, key, true, &tried)
					u.Done(now, &tried, 200, upstream.Success)
				}
			})
		})
	}
}

// TestPickAllocations: choosing a target, a retry's and reporting them
// allocates nothing, in every balance mode.
func TestPickAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	for _, bal := range balances {
		u := benchUpstream(t, bal)
		now := int64(0)
		n := testing.AllocsPerRun(1000, func() {
			now += 1000
			var tried upstream.Tries
			u.Pick(now, upstream.HashKey("k"), true, &tried)
			u.Retry(now, upstream.HashKey("k"), true, &tried, 503)
			u.Done(now, &tried, 200, upstream.Success)
		})
		if n != 0 {
			t.Errorf("%v: %.1f allocations per pick, want 0", bal, n)
		}
	}
}

// BenchmarkHashPickTargets is a hash pick over 4, 32 and 256 (MaxTargets)
// targets, equal and mixed weights: rendezvous hashing scores every
// candidate, so its cost grows with the targets.
func BenchmarkHashPickTargets(b *testing.B) {
	for _, n := range []int{4, 32, 256} {
		for _, mixed := range []bool{false, true} {
			ws := make([]int, n)
			for i := range ws {
				ws[i] = 1
				if mixed {
					ws[i] = 1 + i%7
				}
			}
			b.Run(fmt.Sprintf("%d targets, mixed weights %v", n, mixed), func(b *testing.B) {
				_, u := build(b, upstream.Spec{Targets: targets(n, ws...), Balance: upstream.Hash}, nil)
				b.ReportAllocs()
				for i := range b.N {
					var tried upstream.Tries
					u.Pick(0, upstream.HashKey("user-42")+uint64(i), true, &tried)
					u.Done(0, &tried, 200, upstream.Success)
				}
			})
		}
	}
}

// BenchmarkHashPickDistinctWeights is the worst case of weighted
// rendezvous: 256 targets, each of its own weight, so each its own class.
func BenchmarkHashPickDistinctWeights(b *testing.B) {
	ws := make([]int, 256)
	for i := range ws {
		ws[i] = i + 1
	}
	_, u := build(b, upstream.Spec{Targets: targets(256, ws...), Balance: upstream.Hash}, nil)
	b.ReportAllocs()
	for i := range b.N {
		var tried upstream.Tries
		u.Pick(0, upstream.HashKey("user-42")+uint64(i), true, &tried)
		u.Done(0, &tried, 200, upstream.Success)
	}
}
