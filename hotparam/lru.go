package hotparam

import (
	"hash/maphash"
	"math"
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
// Size on amd64: 16 (key) + 16 (links) + 8 (state) + 4 (param) + 4 (flags) = 48 bytes.
type entry struct {
	key        string // the value, or its digest if longer than maxKeyLen (see ref)
	prev, next *entry
	state      atomic.Int64
	param      int32 // index into rule.params: 0 is the rule's count, i>0 is items[i-1]
	// flags is the index of the entry's shard (set once, before the entry
	// is shared) shifted left by one, and the bit watched: an eviction scan
	// passed the entry while it was active. Ending its last call then bumps
	// the shard's released, which tells a shard that remembers a failed scan
	// (shard.stuck) to look again.
	flags atomic.Uint32
}

const watched = 1

// wake tells e's shard that e may have become evictable, if a scan watches
// it. Releases call it without the shard's lock.
func (t *table) wake(e *entry) {
	if f := e.flags.Load(); f&watched != 0 {
		t.shards[f>>1].released.Add(1)
	}
}

// shard is one independently locked part of a rule's LRU. Invariant under
// mu: every entry of m is on the list rooted at root, most recently used
// first.
type shard struct {
	mu   sync.Mutex
	m    map[string]*entry
	root entry // sentinel: root.next is the most recent, root.prev the least
	// stuck: the last eviction scan found no entry evictable, and since then
	// no entry was added or touched, no watched entry was released
	// (released is still stuckAt) and the clock is before stuckTill,
	// when the first throttled call the scan passed leaves its queue. A new
	// scan would find the same, so it is skipped: refusing a new value while
	// every value is busy costs O(1), not a walk of the shard.
	stuck     bool
	idx       uint32 // index in table.shards
	stuckAt   uint64
	stuckTill int64
	// released counts releases of watched entries (see entry.flags).
	released atomic.Uint64
	_        [32]byte // 128 bytes a shard: neighbouring shards never share a cache line
}

func (s *shard) init(idx int) {
	s.idx = uint32(idx)
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

// lookup returns k's entry in s, creating it if it is not tracked. When the
// table is full it first evicts the least recently used evictable entry of
// s, or failing that of another shard. It returns nil only when no tracked
// value it could look at may be evicted. The caller holds s.mu. Looking up a
// tracked key does not allocate.
func (t *table) lookup(s *shard, r *rule, k *ref, now int64) *entry {
	if e, ok := s.find(k); ok {
		if e.flags.Load()&watched != 0 {
			// Its release will not be announced any more: forget the scan.
			e.flags.And(^uint32(watched))
			s.stuck = false
		}
		s.moveToFront(e)
		return e
	}
	if !t.reserve() && !s.evict(r, now) && !t.evictElsewhere(s, r, now) {
		return nil
	}
	e := &entry{key: k.keep(), param: r.paramOf(k.val)}
	e.flags.Store(s.idx << 1)
	e.state.Store(r.initialState())
	s.m[e.key] = e
	s.pushFront(e)
	s.stuck = false
	return e
}

// evict removes the least recently used evictable entry of s. Active
// entries it passes over are moved to the front, so that the next scan
// starts with others: the walk is amortised over the calls that made them
// recent, and only a shard whose every value is active is walked whole
// (once, then remembered in stuck until something may have changed).
func (s *shard) evict(r *rule, now int64) bool {
	gen := s.released.Load() // before the scan: a release during it counts
	if s.stuck && gen == s.stuckAt && now < s.stuckTill {
		return false
	}
	till := int64(math.MaxInt64)
	for range len(s.m) {
		e := s.root.prev
		if r.evictable(e, now) {
			s.remove(e)
			return true
		}
		// Watch, then look again: either this look sees a release that
		// raced the first, or that release sees watched and bumps
		// released (both atomics are sequentially consistent).
		e.flags.Or(watched)
		if r.evictable(e, now) {
			s.remove(e)
			return true
		}
		if r.kind == kindQueue {
			till = min(till, e.state.Load()) // evictable from then on
		}
		s.moveToFront(e)
	}
	s.stuck, s.stuckAt, s.stuckTill = true, gen, till
	return false
}

func (s *shard) remove(e *entry) {
	s.unlink(e)
	delete(s.m, e.key)
	s.stuck = false
}

// evictElsewhere evicts from another shard than own, whose lock the caller
// holds. To rule out a lock-order deadlock it waits only for shards after
// own and only tries the locks of shards before it: one of those held by
// another call at that instant is skipped.
func (t *table) evictElsewhere(own *shard, r *rule, now int64) bool {
	after := false
	for i := range t.shards {
		s := &t.shards[i]
		if s == own {
			after = true
			continue
		}
		if after {
			s.mu.Lock()
		} else if !s.mu.TryLock() {
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
	seed2  maphash.Seed // second half of a long value's digest (see ref)
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
	t := &table{seed: maphash.MakeSeed(), seed2: maphash.MakeSeed(), mask: uint64(n - 1), cap: int64(capacity), shards: make([]shard, n)}
	for i := range t.shards {
		t.shards[i].init(i)
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
