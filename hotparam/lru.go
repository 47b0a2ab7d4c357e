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

// shard is one independently locked part of a rule's LRU. Invariant under
// mu: every entry of m is on the list rooted at root, most recently used
// first.
type shard struct {
	mu   sync.Mutex
	m    map[string]*entry
	root entry    // sentinel: root.next is the most recent, root.prev the least
	_    [64]byte // 128 bytes a shard: neighbouring shards never share a cache line
}

func (s *shard) init() {
	s.m = make(map[string]*entry)
	s.root.next, s.root.prev = &s.root, &s.root
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

// lookup returns key's entry in s, creating it if it is not tracked. When
// the table is full it first evicts the least recently used evictable entry
// of s, or failing that of another shard. It returns nil when no entry it
// looked at may be evicted. The caller holds s.mu. Looking up a tracked key
// does not allocate.
func (t *table) lookup(s *shard, r *rule, key string, now int64) *entry {
	if e, ok := s.m[key]; ok {
		s.moveToFront(e)
		return e
	}
	if !t.reserve() && !s.evict(r, now) && !t.evictElsewhere(s, r, now) {
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

// evictElsewhere evicts from another shard than own (whose lock the caller
// holds). It only tries locks, so two inserts doing this cannot deadlock.
func (t *table) evictElsewhere(own *shard, r *rule, now int64) bool {
	for i := range t.shards {
		s := &t.shards[i]
		if s == own || !s.mu.TryLock() {
			continue
		}
		ok := s.evict(r, now)
		s.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// reserve counts one more tracked entry if the table is below its cap.
// Evictions leave the count alone: the evicted entry's place is reused.
func (t *table) reserve() bool {
	for {
		n := t.count.Load()
		if n >= t.cap {
			return false
		}
		if t.count.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (s *shard) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// table is a rule's bounded map from value to entry. Values are spread over
// shards by hash; the cap is for the whole table (count), so that an uneven
// spread does not evict values while the table has room. Eviction takes the
// least recently used entry of the inserting value's shard: an LRU exact per
// shard and approximate across shards.
type table struct {
	seed   maphash.Seed
	mask   uint64
	cap    int64
	count  atomic.Int64 // entries in all shards; <= cap
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
	t := &table{seed: maphash.MakeSeed(), mask: uint64(n - 1), cap: int64(capacity), shards: make([]shard, n)}
	for i := range t.shards {
		t.shards[i].init()
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
