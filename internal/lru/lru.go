// Package lru is the bounded map from keys that requests supply (origins,
// parameter values) to per-key state, shared by the limiter and hotparam.
//
// A Cache holds at most Cap entries. Past the cap a new key takes the place
// of the least recently used entry that may go (Options.Free); what happens
// when none may go is Options.Full. Keys longer than MaxKeyLen are kept as a
// digest (see key.go), so Cap bounds memory and not only the number of keys.
//
// Entries are spread over shards by hash, each with its own lock and list,
// so that parallel calls rarely share a lock; the cap is for the whole Cache,
// so that an uneven spread does not evict below it. Eviction takes the least
// recently used entry of the new key's shard: an exact LRU within a shard and
// approximate across shards. Small caps use one shard, an exact LRU.
package lru

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
)

// Full says what Get does when the Cache is at its cap and no entry it looks
// at may be evicted.
type Full uint8

const (
	// Refuse: Get returns no entry, after looking at every entry of every
	// shard (hotparam fails closed: a value's limit must not be forgotten).
	Refuse Full = iota
	// Grow: Get looks at the scanLimit oldest entries of the key's shard and
	// then adds the entry past the cap (the limiter's origins: statistics must
	// never refuse a call). Memory stays bounded by the cap plus the entries
	// in use.
	Grow
)

// scanLimit is how many entries a Grow cache looks at before it grows.
const scanLimit = 64

// Options configure a Cache.
type Options[V any] struct {
	Cap  int
	Full Full
	// Init sets up the value of a new entry. key is the key as given to Get
	// (not its digest) and may alias a buffer the caller reuses: Init must
	// not keep it.
	Init func(v *V, key string)
	// Free returns the instant from which dropping v loses nothing a caller
	// holds, if nothing else happens to it: an instant <= now (such as
	// math.MinInt64) if it may go now, math.MaxInt64 if the passing of time
	// alone will not free it. It is called with v's shard locked, and must
	// not block.
	Free func(v *V) int64
}

// Cache is a sharded, bounded LRU map. Build it with New; safe for
// concurrent use.
type Cache[V any] struct {
	opts  Options[V]
	seeds [2]maphash.Seed // shard choice and a long key's digest
	mask  uint64
	cap   int64
	count atomic.Int64 // entries in all shards; <= cap unless Grow
	// shards are made by the first Get: a rule that no request reaches
	// costs a few hundred bytes, not its shards' (64 for a large cap,
	// about 12 KiB), so loading many rules stays cheap.
	shards atomic.Pointer[[]Shard[V]]
}

// Entry is one tracked key. V is the caller's; the links and key are guarded
// by the shard's lock.
type Entry[V any] struct {
	key        string // the key, or its long form (see key.go)
	prev, next *Entry[V]
	// flags is the index of the entry's shard (set once, before the entry is
	// shared) shifted left by one, and the bit watched: a Refuse scan passed
	// the entry while it could not go. Released then bumps the shard's
	// released, which tells a shard that remembers a failed scan (stuck) to
	// look again.
	flags atomic.Uint32
	V     V
}

const watched = 1

// Shard is one independently locked part of a Cache. Invariant under mu:
// every entry of m is on the list rooted at root, most recently used first.
type Shard[V any] struct {
	mu   sync.Mutex
	m    map[string]*Entry[V]
	root Entry[V] // sentinel: root.next is the most recent, root.prev the least
	// stuck: the last Refuse scan found no entry that may go, and since then
	// no entry was added or touched, no watched entry was released (released
	// is still stuckAt) and the clock is before stuckTill, the earliest Free
	// instant the scan saw. A new scan would find the same, so it is skipped:
	// refusing a new key while every entry is busy costs O(1), not a walk.
	stuck     bool
	idx       uint32
	stuckAt   uint64
	stuckTill int64
	released  atomic.Uint64 // releases of watched entries
	_         [64]byte      // neighbouring shards never share a cache line
}

// New returns an empty Cache. A Cap below 1 counts as 1.
func New[V any](o Options[V]) *Cache[V] {
	o.Cap = max(o.Cap, 1)
	n := shardsFor(o.Cap)
	return &Cache[V]{opts: o, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		mask: uint64(n - 1), cap: int64(o.Cap)}
}

// shardList returns the shards, making them on first use; calls racing to
// make them all get the one that was stored first.
func (c *Cache[V]) shardList() []Shard[V] {
	if p := c.shards.Load(); p != nil {
		return *p
	}
	ss := make([]Shard[V], c.mask+1)
	for i := range ss {
		s := &ss[i]
		s.idx = uint32(i)
		s.m = make(map[string]*Entry[V])
		s.root.next, s.root.prev = &s.root, &s.root
	}
	if !c.shards.CompareAndSwap(nil, &ss) {
		return *c.shards.Load()
	}
	return ss
}

// made returns the shards, or none if no Get has made them yet.
func (c *Cache[V]) made() []Shard[V] {
	if p := c.shards.Load(); p != nil {
		return *p
	}
	return nil
}

// shardsFor picks a power-of-two shard count: one shard (an exact LRU) for
// small caps, more for large ones.
func shardsFor(capacity int) int {
	n := 1
	for n < 64 && capacity/(n*2) >= 1024 {
		n *= 2
	}
	return n
}

// Get returns key's entry, adding it if it is not tracked, with its shard
// locked: the caller reads or changes e.V and then calls sh.Unlock (also
// when e is nil). At the cap it first evicts the least recently used entry
// that may go at now; e is nil only for a Refuse cache in which no entry may
// go. Getting a tracked key allocates nothing, however long the key.
func (c *Cache[V]) Get(key string, now int64) (e *Entry[V], sh *Shard[V]) {
	var k ref
	s := c.locate(key, &k)
	s.mu.Lock()
	if e, ok := s.find(&k); ok {
		if e.flags.Load()&watched != 0 {
			// Touched: a scan must look at it again, and its release need
			// not be announced any more.
			e.flags.And(^uint32(watched))
			s.stuck = false
		}
		s.moveToFront(e)
		return e, s
	}
	if !c.reserve() && !c.evict(s, now) {
		if c.opts.Full == Refuse {
			return nil, s
		}
		c.count.Add(1)
	}
	e = &Entry[V]{key: k.keep()}
	e.flags.Store(s.idx << 1)
	if c.opts.Init != nil {
		c.opts.Init(&e.V, key)
	}
	s.m[e.key] = e
	s.pushFront(e)
	s.stuck = false
	return e, s
}

// Key returns the key e keeps and true, or "" and false when e keeps
// only the long form of a key longer than MaxKeyLen. The key outlives
// the string Get was given, and e.
func (e *Entry[V]) Key() (string, bool) {
	if len(e.key) > MaxKeyLen {
		return "", false
	}
	return e.key, true
}

// Unlock releases the shard Get locked.
func (s *Shard[V]) Unlock() { s.mu.Unlock() }

// Released tells the cache that e may have become free to go (a call it held
// ended). Only a Refuse cache needs it; it costs one atomic load unless a
// scan is watching e. It takes no lock.
func (c *Cache[V]) Released(e *Entry[V]) {
	if f := e.flags.Load(); f&watched != 0 {
		c.made()[f>>1].released.Add(1)
	}
}

// reserve counts one more entry if the cache is below its cap. Evictions
// leave the count alone: the evicted entry's place is reused.
func (c *Cache[V]) reserve() bool {
	for {
		n := c.count.Load()
		if n >= c.cap {
			return false
		}
		if c.count.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// evict makes room for one entry in s (locked): from s, or for a Refuse
// cache from another shard.
func (c *Cache[V]) evict(s *Shard[V], now int64) bool {
	if c.opts.Full == Grow {
		return c.evictFrom(s, now, scanLimit)
	}
	return c.evictFrom(s, now, math.MaxInt) || c.evictElsewhere(s, now)
}

// evictFrom removes the least recently used entry of s that may go, looking
// at most at limit entries. Entries it passes over are moved to the front,
// so that the next scan starts with others: the walk is amortised over the
// calls that made them recent, and only a shard whose every entry is busy
// is walked whole (once, then remembered in stuck until something may have
// changed).
func (c *Cache[V]) evictFrom(s *Shard[V], now int64, limit int) bool {
	refuse := c.opts.Full == Refuse
	gen := s.released.Load() // before the scan: a release during it counts
	if refuse && s.stuck && gen == s.stuckAt && now < s.stuckTill {
		return false
	}
	till := int64(math.MaxInt64)
	for range min(len(s.m), limit) {
		e := s.root.prev
		at := c.free(e)
		if at <= now {
			s.remove(e)
			return true
		}
		if refuse {
			// Watch, then look again: either this look sees a release that
			// raced the first, or that release sees watched and bumps
			// released (both atomics are sequentially consistent).
			e.flags.Or(watched)
			if at = c.free(e); at <= now {
				s.remove(e)
				return true
			}
		}
		till = min(till, at)
		s.moveToFront(e)
	}
	if refuse {
		s.stuck, s.stuckAt, s.stuckTill = true, gen, till
	}
	return false
}

func (c *Cache[V]) free(e *Entry[V]) int64 {
	if c.opts.Free == nil {
		return math.MinInt64
	}
	return c.opts.Free(&e.V)
}

// evictElsewhere evicts from another shard than own, whose lock the caller
// holds. To rule out a lock-order deadlock it waits only for shards after
// own and only tries the locks of shards before it: one of those held by
// another call at that instant is skipped.
func (c *Cache[V]) evictElsewhere(own *Shard[V], now int64) bool {
	after := false
	shards := c.made()
	for i := range shards {
		s := &shards[i]
		if s == own {
			after = true
			continue
		}
		if after {
			s.mu.Lock()
		} else if !s.mu.TryLock() {
			continue
		}
		ok := c.evictFrom(s, now, math.MaxInt)
		s.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// Len returns how many keys are tracked now. It takes every shard's lock in
// turn.
func (c *Cache[V]) Len() int {
	n := 0
	shards := c.made()
	for i := range shards {
		s := &shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// Each calls fn for every entry, shard by shard and most recent first within
// a shard, with the entry's shard locked. name is the key as shown to people
// (see Name); digest says the entry keeps only the long form of its key, so
// name is no key a caller gave (its length does not tell: a prefix cut back
// to a character boundary may be empty). It is for statistics, not the hot
// path.
func (c *Cache[V]) Each(fn func(name string, digest bool, v *V)) {
	shards := c.made()
	for i := range shards {
		s := &shards[i]
		s.mu.Lock()
		for e := s.root.next; e != &s.root; e = e.next {
			_, short := e.Key()
			fn(name(e.key), !short, &e.V)
		}
		s.mu.Unlock()
	}
}

func (s *Shard[V]) unlink(e *Entry[V]) {
	e.prev.next = e.next
	e.next.prev = e.prev
}

func (s *Shard[V]) pushFront(e *Entry[V]) {
	e.prev = &s.root
	e.next = s.root.next
	s.root.next.prev = e
	s.root.next = e
}

func (s *Shard[V]) pushBack(e *Entry[V]) {
	e.next = &s.root
	e.prev = s.root.prev
	s.root.prev.next = e
	s.root.prev = e
}

func (s *Shard[V]) moveToFront(e *Entry[V]) {
	if s.root.next == e {
		return
	}
	s.unlink(e)
	s.pushFront(e)
}

func (s *Shard[V]) remove(e *Entry[V]) {
	s.unlink(e)
	delete(s.m, e.key)
	s.stuck = false
}

// Carry fills c with the entries of from for which keep, handed the new
// entry's value (zero) and the old one's, fills the new one and reports
// true: an edited rule's table taking over the state of the table it
// replaces, at a reload. c must be new, used by no Get and shared with
// nobody yet (Carry panics if a Get made its shards). It takes from's
// seeds and keeps each key as from kept it, without Init: a key longer
// than MaxKeyLen is kept only as its digest under those seeds, and the
// key's bytes are gone. from may be in use: each of its shards is locked
// in turn while its entries are read, keep included, so keep must not
// block. At most c's cap entries are carried, each shard of from giving
// its most recent first, up to an even part of the room left; within c's
// shards they keep the order in which they were carried, most recent
// first (so exactly from's order when the two have the same cap).
func (c *Cache[V]) Carry(from *Cache[V], keep func(dst, src *V) bool) {
	if c.made() != nil {
		panic("lru: Carry into a Cache already in use")
	}
	c.seeds = from.seeds
	src := from.made()
	var d *Entry[V] // one refused by keep is filled again, not allocated anew
	for i := range src {
		s := &src[i]
		part := (c.cap - c.count.Load() + int64(len(src)-i-1)) / int64(len(src)-i)
		s.mu.Lock()
		for e := s.root.next; e != &s.root && part > 0; e = e.next {
			if d == nil {
				d = &Entry[V]{key: e.key}
			} else {
				*d = Entry[V]{key: e.key}
			}
			if !keep(&d.V, &e.V) {
				continue
			}
			to := c.keptShard(e.key)
			d.flags.Store(to.idx << 1)
			to.m[d.key] = d
			to.pushBack(d)
			c.count.Add(1)
			part--
			d = nil
		}
		s.mu.Unlock()
	}
}

// Peek returns key's entry, if tracked, with its shard locked (the caller
// calls sh.Unlock, also when e is nil): unlike Get it neither adds key nor
// makes it recent, so looking at a key changes nothing an eviction sees.
func (c *Cache[V]) Peek(key string) (e *Entry[V], sh *Shard[V]) {
	var k ref
	s := c.locate(key, &k)
	s.mu.Lock()
	e, _ = s.find(&k)
	return e, s
}

// Forget removes key's entry, if tracked, and reports whether it was: the
// key's next Get starts afresh (Init), as after an eviction. A caller still
// holding the entry keeps a detached copy that no Get returns again. A key
// kept in its long form may also be named as Each shows it (its prefix,
// "…#" and digest), what an operator copies from a listing: that costs a
// walk over every entry, under each shard's lock in turn.
func (c *Cache[V]) Forget(key string) bool {
	var k ref
	s := c.locate(key, &k)
	s.mu.Lock()
	e, ok := s.find(&k)
	if ok {
		s.remove(e)
		c.count.Add(-1)
	}
	s.mu.Unlock()
	if ok || !isLongName(key) {
		return ok
	}
	shards := c.made()
	for i := range shards {
		s := &shards[i]
		s.mu.Lock()
		for e := s.root.next; e != &s.root; e = e.next {
			if len(e.key) == longLen && name(e.key) == key {
				s.remove(e)
				c.count.Add(-1)
				s.mu.Unlock()
				return true
			}
		}
		s.mu.Unlock()
	}
	return false
}
