package limiter

import (
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
	"sync"
	"unicode/utf8"
)

// pinner is a value an lru holds: busy values (calls in flight) are not evicted.
type pinner interface {
	pin()
	busy() bool
}

// lru maps origins to state, keeping at most max entries: past the cap it
// evicts the least recently used entry that is not busy (it looks at the
// evictScan oldest); if all of those are busy it grows, so memory stays bounded
// by max plus the calls in flight. Safe for concurrent use.
type lru[V pinner] struct {
	mu    sync.Mutex // guards m and the list
	max   int
	m     map[string]*lruEntry[V]
	root  lruEntry[V] // root.next is the most recent, root.prev the least
	fresh func() V
	seeds [2]maphash.Seed // a long key's digest (see keyOf)
}

const evictScan = 64

type lruEntry[V pinner] struct {
	key        string
	prev, next *lruEntry[V]
	v          V
}

func newLRU[V pinner](max int, fresh func() V) *lru[V] {
	l := &lru[V]{max: max, m: make(map[string]*lruEntry[V]), fresh: fresh,
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
	l.root.next, l.root.prev = &l.root, &l.root
	return l
}

func (l *lru[V]) unlink(e *lruEntry[V]) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (l *lru[V]) pushFront(e *lruEntry[V]) {
	e.prev, e.next = &l.root, l.root.next
	l.root.next.prev = e
	l.root.next = e
}

// maxKeyLen bounds what an lru keeps of one key. Origins are application
// names, but they come from a request (a header may be 64 KiB): a longer key
// is kept as its first keyPrefix bytes and a 128-bit digest, so that max
// bounds memory and not only the number of origins, while the admin API
// still shows a readable name.
const (
	maxKeyLen = 96
	keyPrefix = 48
)

// keyOf is the key the lru keeps for key. The digest's seeds are the lru's
// own and never leave it, so a client cannot search for two origins that
// share state; only an over-long key pays for it (one allocation).
func (l *lru[V]) keyOf(key string) string {
	if len(key) <= maxKeyLen {
		return key
	}
	n := keyPrefix
	for n > 0 && !utf8.RuneStart(key[n]) {
		n--
	}
	var sum [16]byte
	binary.LittleEndian.PutUint64(sum[:8], maphash.String(l.seeds[0], key))
	binary.LittleEndian.PutUint64(sum[8:], maphash.String(l.seeds[1], key))
	return key[:n] + "…#" + hex.EncodeToString(sum[:])
}

// acquire returns key's value, creating it, pinned: the caller must unpin it.
func (l *lru[V]) acquire(key string) V {
	key = l.keyOf(key)
	l.mu.Lock()
	e := l.m[key]
	if e != nil {
		if l.root.next != e {
			l.unlink(e)
			l.pushFront(e)
		}
	} else {
		if len(l.m) >= l.max {
			l.evict()
		}
		e = &lruEntry[V]{key: key, v: l.fresh()}
		l.m[key] = e
		l.pushFront(e)
	}
	e.v.pin()
	l.mu.Unlock()
	return e.v
}

func (l *lru[V]) evict() {
	e := l.root.prev
	for i := 0; i < evictScan && e != &l.root; i++ {
		if !e.v.busy() {
			l.unlink(e)
			delete(l.m, e.key)
			return
		}
		e = e.prev
	}
}

// each calls fn for every entry, most recent first, under the lock.
func (l *lru[V]) each(fn func(key string, v V)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for e := l.root.next; e != &l.root; e = e.next {
		fn(e.key, e.v)
	}
}
