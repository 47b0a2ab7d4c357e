package cluster_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// Randomized: an avgLocal window (count c per gateway, 1 s; under one
// call a second, the widened window) whose live
// gateways change (K shrinks and grows, debts made and paid) while its
// own passes are given back at random, each at most once. At every pass
// decided at t under limit K_t, the passes of (t - 1 s, t] not given back,
// this one included, are at most K_t.
func TestShrinkDebtNeverOverpasses(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed*7))
			w := newScriptWindow(t)
			// (counts under one: see TestWidenedWindowGiveBack)
			count := []float64{1, 2, 1.5}[rng.IntN(3)]
			live := 1 + rng.IntN(4)
			w.setLive(live)
			type pass struct {
				at, stamp int64
				back      bool
			}
			var passes []pass
			now := int64(0)
			for step := 0; step < 400; step++ {
				switch d := rng.IntN(10); {
				case d < 3: // a tie
				default:
					now += int64(rng.IntN(120)) * ms
				}
				if rng.IntN(12) == 0 {
					live = 1 + rng.IntN(4)
					w.setLive(live)
				}
				var back, backAt int64
				if rng.IntN(3) == 0 && len(passes) > 0 {
					i := len(passes) - 1 - rng.IntN(min(len(passes), 8))
					if !passes[i].back {
						passes[i].back = true
						back, backAt = 1, passes[i].stamp
					}
				}
				res, own := w.callAvgBack(now, count, 1, back, backAt)
				if res != 0 {
					continue
				}
				passes = append(passes, pass{at: now, stamp: own})
				// as the script reads a limit under one call an interval
				limit, iv := count*float64(live), 1000*ms
				K := int(math.Floor(limit + 1e-9))
				if K < 1 {
					m := math.Ceil(1 / limit)
					K, iv = int(math.Floor(m*limit+1e-9)), int64(m)*1000*ms
				}
				in := 0
				for _, p := range passes {
					if !p.back && p.at > now-iv {
						in++
					}
				}
				if in > K {
					t.Fatalf("step %d at %dms: %d passes not given back in the last second, limit %d (live %d)", step, now/ms, in, K, live)
				}
			}
		})
	}
}

// The same over grouped windows (K above 1024: slots of g tokens), calls
// of many tokens and partial give-backs.
func TestShrinkDebtGroupedNeverOverpasses(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed*13))
			w := newScriptWindow(t)
			count := float64(700 + rng.IntN(900))
			live := 1 + rng.IntN(4)
			w.setLive(live)
			type pass struct {
				at, stamp, n int64
			}
			var passes []pass
			now := int64(0)
			for step := 0; step < 300; step++ {
				if rng.IntN(10) >= 3 {
					now += int64(rng.IntN(120)) * ms
				}
				if rng.IntN(12) == 0 {
					live = 1 + rng.IntN(4)
					w.setLive(live)
				}
				var back, backAt int64
				if rng.IntN(3) == 0 && len(passes) > 0 {
					i := len(passes) - 1 - rng.IntN(min(len(passes), 8))
					if passes[i].n > 0 {
						back = 1 + rng.Int64N(passes[i].n)
						passes[i].n -= back
						backAt = passes[i].stamp
					}
				}
				K := int64(count) * int64(live)
				n := 1 + rng.Int64N(K/3)
				res, own := w.callAvgBack(now, count, n, back, backAt)
				if res != 0 {
					continue
				}
				passes = append(passes, pass{at: now, stamp: own, n: n})
				in := int64(0)
				for _, p := range passes {
					if p.at > now-1000*ms {
						in += p.n
					}
				}
				if in > K {
					t.Fatalf("step %d at %dms: %d tokens not given back in the last second, limit %d (live %d)", step, now/ms, in, K, live)
				}
			}
		})
	}
}
