package upstream

import (
	"math"
	"slices"
)

// rendezvous is weighted rendezvous (highest random weight) hashing: every
// target scores a key by a hash of the key and the target's URL, scaled by
// its weight, and the candidate with the highest score owns the key. A
// target's scores do not depend on the other targets, so one joining takes
// only the keys it now scores highest (its weight's share of them), one
// leaving gives up only its own, each to the runner-up, and the others keep
// theirs, whatever the weights. A ring of virtual nodes (ketama) gets there
// only while each target's point count stands alone: counted in units of the
// weights' greatest common divisor, a target joining could double or halve
// every other's points and move a fifth of the keys between them.
//
// Lookup hashes the key once per target (at most MaxTargets), with no table
// to build. Targets of one weight are a class: within it the highest hash
// has the highest score, so only each class's best may pay the logarithm
// that weighs it against the other classes, and only if a cheap bound says
// it could win.
// Immutable.
type rendezvous struct {
	seeds   []uint64 // per target: its URL's hash
	urls    []string // per target: orders equal scores, as no listing does
	classes []weightClass
}

// weightClass is the targets of one weight.
type weightClass struct {
	weight  float64
	members []int
}

func newRendezvous(ts []Target) *rendezvous {
	r := &rendezvous{seeds: make([]uint64, len(ts)), urls: make([]string, len(ts))}
	for i, t := range ts {
		r.seeds[i], r.urls[i] = HashKey(t.URL), t.URL
		w := float64(weightOf(t))
		c := slices.IndexFunc(r.classes, func(c weightClass) bool { return c.weight == w })
		if c < 0 {
			r.classes, c = append(r.classes, weightClass{weight: w}), len(r.classes)
		}
		r.classes[c].members = append(r.classes[c].members, i)
	}
	return r
}

// pick returns the candidate that scores key highest; -1 if cand is
// empty. A target out of cand hands its keys to their runners-up, and gets
// them back when it returns.
func (r *rendezvous) pick(key uint64, cand *Set) int {
	best, bestE := -1, 0.0
	for _, c := range r.classes {
		top, topHash := -1, uint64(0)
		for _, i := range c.members {
			if !cand.Has(i) {
				continue
			}
			// The key is already mixed (HashKey); multiplying before the
			// finaliser keeps two targets' scores from moving together.
			h := mix64((key ^ r.seeds[i]) * 0x9e3779b97f4a7c15)
			if top < 0 || h > topHash || h == topHash && r.urls[i] < r.urls[top] {
				top, topHash = i, h
			}
		}
		if top < 0 {
			continue
		}
		if len(r.classes) == 1 {
			return top
		}
		// The least -ln(u) / w for u uniform in (0, 1) wins: a target of
		// weight w wins a key with probability w / (the candidates'
		// weights). -ln(u) > 1 - u, so a class whose 1 - u alone is past
		// the best needs no logarithm: with many weights, most do not.
		u := (float64(topHash>>11) + 0.5) / (1 << 53)
		if best >= 0 && (1-u)/c.weight > bestE {
			continue
		}
		e := -math.Log(u) / c.weight
		if best < 0 || e < bestE || e == bestE && r.urls[top] < r.urls[best] {
			best, bestE = top, e
		}
	}
	return best
}

func weightOf(t Target) int {
	if t.Weight <= 0 {
		return 1
	}
	return t.Weight
}
