package upstream

import (
	"cmp"
	"slices"
	"strconv"
)

// Ring geometry: each unit of weight (the weights' greatest common
// divisor) is pointsPerWeight virtual nodes (as ketama does), so a target's
// share of the keys is within a few percent of its weight's; an upstream
// whose weights add up to more than maxRingPoints/pointsPerWeight units
// gets fewer points per unit, bounding the ring's memory and a lookup's
// cost (and then a target joining or leaving also moves a few keys
// between the others).
const (
	pointsPerWeight = 160
	maxRingPoints   = 1 << 16
)

// ring is a consistent-hash ring. A point's position depends only on its
// target's URL and its number, so a target joining or leaving takes or
// gives up only the keys of its own points: about 1/N of them. Immutable.
type ring struct {
	hashes  []uint64 // sorted
	targets []uint16 // targets[i] owns hashes[i]
}

func newRing(ts []Target) *ring {
	// Weights count in units of their greatest common divisor: equal
	// weights of 100 or 1000 (percentages, per mille) are weights of 1, so
	// their sum does not thin every target's points (which would move keys
	// between the old targets when one joins).
	g := 0
	for _, t := range ts {
		g = gcd(g, weightOf(t))
	}
	sum := 0
	for _, t := range ts {
		sum += weightOf(t) / g
	}
	per := pointsPerWeight
	if sum*per > maxRingPoints {
		per = max(1, maxRingPoints/sum)
	}
	type point struct {
		h uint64
		t uint16
	}
	pts := make([]point, 0, sum*per)
	for i, t := range ts {
		for j := range weightOf(t) / g * per {
			pts = append(pts, point{HashKey(t.URL + "#" + strconv.Itoa(j)), uint16(i)})
		}
	}
	// Equal hashes (vanishingly rare) are ordered by URL, so the ring does
	// not depend on the order targets are listed in.
	slices.SortFunc(pts, func(a, b point) int {
		if c := cmp.Compare(a.h, b.h); c != 0 {
			return c
		}
		return cmp.Compare(ts[a.t].URL, ts[b.t].URL)
	})
	r := &ring{hashes: make([]uint64, len(pts)), targets: make([]uint16, len(pts))}
	for i, p := range pts {
		r.hashes[i], r.targets[i] = p.h, p.t
	}
	return r
}

// pick returns the owner of the first point at or after key (clockwise)
// that is in cand; -1 if cand is empty. A target out of cand hands its keys
// to the next targets on the ring, and gets them back when it returns.
func (r *ring) pick(key uint64, cand *Set) int {
	if cand.Empty() {
		return -1
	}
	i, _ := slices.BinarySearch(r.hashes, key)
	for n := len(r.hashes); ; i++ {
		if i == n {
			i = 0
		}
		if t := int(r.targets[i]); cand.Has(t) {
			return t
		}
	}
}

func weightOf(t Target) int {
	if t.Weight <= 0 {
		return 1
	}
	return t.Weight
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
