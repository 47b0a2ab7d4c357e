package hotparam

import (
	"encoding/binary"
	"hash/maphash"
	"strings"
)

// maxKeyLen is the longest value a table keeps as it is. A longer value (a
// header, cookie or query value may be up to 64 KiB) is kept as a 16-byte
// digest instead, so that every tracked value costs about the same bytes and
// maxTrackedValues bounds memory, not only the number of values.
const maxKeyLen = 64

// ref is a request's value as a table finds it: by the value itself when it
// is short, else by its digest. Items were matched on val before this.
type ref struct {
	val  string // the request's value as given; may alias a reused buffer
	long bool   // len(val) > maxKeyLen: the table's key is sum
	// sum is two 64-bit hashes of val under the table's two random seeds.
	// 128 bits make a collision (two values sharing state) as unlikely as
	// guessing a random 128-bit number; the seeds are per table and never
	// leave it, so a client cannot search for one offline. A 16-byte short
	// value shares the table's key space with digests, at the same odds.
	sum [16]byte
}

// locate returns val's shard and how to find val in it. Short values cost
// one hash at most (none with a single shard); long ones two, one of which
// also picks the shard.
func (t *table) locate(val string) (*shard, ref) {
	k := ref{val: val}
	if len(val) <= maxKeyLen {
		return t.shard(val), k
	}
	h := maphash.String(t.seed, val)
	k.long = true
	binary.LittleEndian.PutUint64(k.sum[:8], h)
	binary.LittleEndian.PutUint64(k.sum[8:], maphash.String(t.seed2, val))
	return &t.shards[h&t.mask], k
}

// find returns k's entry in s, if tracked. The caller holds s.mu. It does not
// allocate: the compiler reads the map with string(bytes) in place.
func (s *shard) find(k *ref) (*entry, bool) {
	if k.long {
		e, ok := s.m[string(k.sum[:])]
		return e, ok
	}
	e, ok := s.m[k.val]
	return e, ok
}

// keep returns the key an entry for k keeps: a copy, since the caller's
// string may alias a request buffer that is reused, of the value or digest.
func (k *ref) keep() string {
	if k.long {
		return string(k.sum[:])
	}
	return strings.Clone(k.val)
}
