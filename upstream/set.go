package upstream

import "math/bits"

// MaxTargets is the most targets one upstream may have: a Set of target
// indexes is four machine words, so a pick needs no allocation.
const MaxTargets = 256

// Set is a set of target indexes (0..MaxTargets-1). The zero Set is empty.
// A request keeps the targets it tried in one, so that a retry goes to
// another target.
type Set [MaxTargets / 64]uint64

// Add puts i in the set.
func (s *Set) Add(i int) { s[i>>6] |= 1 << (uint(i) & 63) }

// Has reports whether i is in the set.
func (s *Set) Has(i int) bool { return s[i>>6]&(1<<(uint(i)&63)) != 0 }

// Len is the number of indexes in the set.
func (s *Set) Len() int {
	return bits.OnesCount64(s[0]) + bits.OnesCount64(s[1]) + bits.OnesCount64(s[2]) + bits.OnesCount64(s[3])
}

// Empty reports whether the set has no index.
func (s *Set) Empty() bool { return s[0]|s[1]|s[2]|s[3] == 0 }
