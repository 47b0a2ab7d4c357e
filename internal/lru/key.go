package lru

import (
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key a Cache keeps as it is. A longer key (a
// header, cookie or query value may be 64 KiB) is kept in its long form: its
// first prefixLen bytes, a 128-bit digest of the whole key and one byte
// saying how much of the prefix ends on a character boundary. Every entry
// thus costs about the same bytes, and Cap bounds memory, not only the
// number of keys.
//
// The digest is two 64-bit hashes under the Cache's own random seeds, which
// never leave it, so a client cannot search offline for two keys that share
// state; 128 bits make a collision as unlikely as guessing a random 128-bit
// number. The long form is longer than MaxKeyLen, so it never equals a key
// kept as it is.
const (
	MaxKeyLen = 64
	prefixLen = 48
	longLen   = prefixLen + 16 + 1
)

// ref is a key as a Cache finds it: by the key itself when it is short, else
// by its long form, built on the stack so that finding it allocates nothing.
type ref struct {
	key  string // as given; may alias a reused buffer
	long bool
	form [longLen]byte
}

// locate fills k for key and returns its shard. A short key costs one hash
// at most (none with a single shard); a long one two, one of which also
// picks the shard.
func (c *Cache[V]) locate(key string, k *ref) *Shard[V] {
	k.key = key
	shards := c.shardList()
	if len(key) <= MaxKeyLen {
		if c.mask == 0 {
			return &shards[0]
		}
		return &shards[maphash.String(c.seeds[0], key)&c.mask]
	}
	h := maphash.String(c.seeds[0], key)
	k.long = true
	n := copy(k.form[:prefixLen], key)
	for n > 0 && !utf8.RuneStart(key[n]) {
		n--
	}
	binary.LittleEndian.PutUint64(k.form[prefixLen:], h)
	binary.LittleEndian.PutUint64(k.form[prefixLen+8:], maphash.String(c.seeds[1], key))
	k.form[longLen-1] = byte(n)
	return &shards[h&c.mask]
}

// keptShard is the shard of c that a key kept as kept (by keep) belongs
// to, as locate picks it: a long form holds the hash that picked it.
func (c *Cache[V]) keptShard(kept string) *Shard[V] {
	shards := c.shardList()
	switch {
	case c.mask == 0:
		return &shards[0]
	case len(kept) > MaxKeyLen:
		return &shards[binary.LittleEndian.Uint64([]byte(kept[prefixLen:prefixLen+8]))&c.mask]
	}
	return &shards[maphash.String(c.seeds[0], kept)&c.mask]
}

// find returns k's entry in s, if tracked; the caller holds s.mu. The
// compiler reads the map with string(bytes) in place, without a copy.
func (s *Shard[V]) find(k *ref) (*Entry[V], bool) {
	if k.long {
		e, ok := s.m[string(k.form[:])]
		return e, ok
	}
	e, ok := s.m[k.key]
	return e, ok
}

// keep returns the key an entry keeps for k: a copy (the caller's string may
// alias a request buffer that is reused) of the key or of its long form.
func (k *ref) keep() string {
	if k.long {
		return string(k.form[:])
	}
	return strings.Clone(k.key)
}

// name is how a kept key is shown: a short key as it is, a long one as its
// first bytes (up to a character boundary), "…#" and its digest in hex.
func name(kept string) string {
	if len(kept) != longLen {
		return kept
	}
	n := int(kept[longLen-1])
	return kept[:n] + "…#" + hex.EncodeToString([]byte(kept[prefixLen:longLen-1]))
}

// isLongName reports whether s has the shape of a long key's name: "…#"
// and 32 hex digits after at most prefixLen bytes.
func isLongName(s string) bool {
	const tail = len("…#") + 32
	if len(s) < tail || len(s) > prefixLen+tail || !strings.HasPrefix(s[len(s)-tail:], "…#") {
		return false
	}
	_, err := hex.DecodeString(s[len(s)-32:])
	return err == nil
}
