package hotparam

import (
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
)

// idle is the state word of a value with no history: for a token bucket a
// theoretical arrival time far in the past (a full bucket), for a virtual
// queue a last pass far in the past (nobody queued). It is far enough from
// math.MinInt64 that adding a cost cannot overflow.
const idle = math.MinInt64 / 4

// entry is one tracked value of one rule. Its whole limiting state is the one
// atomic word state, whose meaning depends on the rule's kind (see kind). The
// list links and key are guarded by the owning shard's mutex.
//
// Size on amd64: 16 (key) + 16 (links) + 8 (state) + 4 (param) + pad = 48 bytes.
type entry struct {
	key        string
	prev, next *entry
	state      atomic.Int64
	param      int32 // index into rule.params: 0 is the rule's count, i>0 is items[i-1]
}

// shard is one independently locked part of a rule's LRU. Invariants under
// mu: len(m) <= cap; every entry of m is on the list rooted at root, most
// recently used first.
type shard struct {
	mu   sync.Mutex
	m    map[string]*entry
	root entry // sentinel: root.next is the most recent, root.prev the least
	cap  int
	_    [32]byte // keep neighbouring shards' mutexes off one cache line
}

func (s *shard) init(capacity int) {
	s.m = make(map[string]*entry)
	s.root.next, s.root.prev = &s.root, &s.root
	s.cap = capacity
}

func (s *shard) unlink(e *entry) {
	e.prev.next = e.next
	e.next.prev = e.prev
}

func (s *shard) pushFront(e *entry) {
	e.prev = &s.root
	e.next = s.root.next
	s.root.next.prev = e
	s.root.next = e
}

func (s *shard) moveToFront(e *entry) {
	if s.root.next == e {
		return
	}
	s.unlink(e)
	s.pushFront(e)
}

// maxEvictScan bounds how many least-recently-used entries an insert looks
// at to find one that may be evicted; active entries it passes over are moved
// to the front so that the next insert looks at others.
const maxEvictScan = 16

// lookup returns key's entry, creating it (and evicting the least recently
// used evictable entry when the shard is full) if it is not tracked. It
// returns nil when the shard is full and the entries scanned are all active.
// The caller holds s.mu. Looking up a tracked key does not allocate.
func (s *shard) lookup(r *rule, key string, now int64) *entry {
	if e, ok := s.m[key]; ok {
		s.moveToFront(e)
		return e
	}
	if len(s.m) >= s.cap && !s.evict(r, now) {
		return nil
	}
	// Clone: the caller's string may alias a request buffer that is reused.
	e := &entry{key: strings.Clone(key), param: r.paramOf(key)}
	e.state.Store(r.initialState())
	s.m[e.key] = e
	s.pushFront(e)
	return e
}

func (s *shard) evict(r *rule, now int64) bool {
	for i := 0; i < maxEvictScan; i++ {
		e := s.root.prev
		if e == &s.root {
			return false
		}
		if r.evictable(e, now) {
			s.unlink(e)
			delete(s.m, e.key)
			return true
		}
		s.moveToFront(e)
	}
	return false
}

func (s *shard) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// table is a rule's bounded map from value to entry.
type table struct {
	seed   maphash.Seed
	mask   uint64
	shards []shard
}

// shardsFor picks a power-of-two shard count: one shard (an exact LRU) for
// small caps, more for large ones so that parallel calls rarely share a lock.
func shardsFor(capacity int) int {
	n := 1
	for n < 64 && capacity/(n*2) >= 1024 {
		n *= 2
	}
	return n
}

func newTable(capacity int) *table {
	n := shardsFor(capacity)
	t := &table{seed: maphash.MakeSeed(), mask: uint64(n - 1), shards: make([]shard, n)}
	for i := range t.shards {
		// Spread the cap exactly so that the shards together never exceed it.
		c := capacity / n
		if i < capacity%n {
			c++
		}
		t.shards[i].init(c)
	}
	return t
}

func (t *table) shard(key string) *shard {
	if t.mask == 0 {
		return &t.shards[0]
	}
	return &t.shards[maphash.String(t.seed, key)&t.mask]
}

func (t *table) len() int {
	n := 0
	for i := range t.shards {
		n += t.shards[i].len()
	}
	return n
}
