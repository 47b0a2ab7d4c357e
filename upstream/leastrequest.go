package upstream

import "math/rand/v2"

// leastRequest is the power of two choices, weighted: it draws one candidate
// in proportion to weight, then a second, different one the same way, and
// takes the one with fewer requests in flight per unit of weight (the first
// on a tie). Drawing by weight makes an idle upstream's traffic follow the
// weights; comparing the loads steers traffic away from a slow target,
// whose requests pile up. A target that is slow to answer gets little, not
// a fixed share. Without locks: the loads are atomics, read once each.
func leastRequest(ts []*member, cand *Set) int {
	total := int64(0)
	n := 0
	for i, m := range ts {
		if cand.Has(i) {
			total += m.weight
			n++
		}
	}
	switch n {
	case 0:
		return -1
	case 1:
		return draw(ts, cand, 0, -1)
	}
	r := rand.Uint64()
	a := draw(ts, cand, int64(uint64(uint32(r))%uint64(total)), -1)
	b := draw(ts, cand, int64((r>>32)%uint64(total-ts[a].weight)), a)
	// in_b/w_b < in_a/w_a, multiplied out: no division.
	la, lb := ts[a].st.inFlight.Load(), ts[b].st.inFlight.Load()
	if lb*ts[a].weight < la*ts[b].weight {
		return b
	}
	return a
}

// draw returns the candidate (other than skip) at weighted offset x.
func draw(ts []*member, cand *Set, x int64, skip int) int {
	last := -1
	for i, m := range ts {
		if i == skip || !cand.Has(i) {
			continue
		}
		if x < m.weight {
			return i
		}
		x -= m.weight
		last = i
	}
	return last
}
