package hotparam

import (
	"math"
	"sync/atomic"
	"time"

	"sluice/internal/lru"
	"sluice/internal/ring"
	"sluice/internal/throttle"
)

// idle is the state word of a value with no history: for a token bucket a
// theoretical arrival time far in the past (a full bucket), for a virtual
// queue a last pass far in the past (nobody queued). It is far enough from
// math.MinInt64 that adding a cost cannot overflow.
const idle = math.MinInt64 / 4

// value is the state of one tracked value of one rule, held in the rule's
// table (an internal/lru Cache that refuses a new value rather than forget
// one in use). Its whole limiting state is the one atomic word state, whose
// meaning depends on the rule's kind (see kind); a queue also has holes.
//
// seen counts the value's passes and blocks of the last minute, for
// operators (Checker.Report); it is written under the shard lock.
//
// Size on amd64: 8 + 8 + 4 + 20 = 40 bytes, 80 with the LRU's key and links
// (an allocation size class: seen costs 16 bytes a value).
type value struct {
	state atomic.Int64
	holes throttle.Holes // throttle: slots given back inside the queue
	param int32          // index into rule.params: 0 is the rule's count, i>0 is items[i-1]
	seen  ring.Coarse    // passes (seenPass) and blocks (seenBlock) over seenWidth
	// alone: until then (ns), the bucket holds passes this gateway decided
	// alone while the token service failed (a clusterMode rule's
	// fallback), which Redis never counted; a cluster pass must fit the
	// bucket too until they have left the window.
	alone atomic.Int64
}

// seenWidth is the span over which a value's passes and blocks are counted
// for operators: "who is being limited now" is the last minute.
const seenWidth = int64(time.Minute)

const (
	seenPass = iota
	seenBlock
)

// count counts one call of v at now, passed or blocked by the rule (a
// dryRun rule's would-be block counts as a block). The caller holds v's
// shard lock.
func (v *value) count(now int64, blocked bool) {
	i := seenPass
	if blocked {
		i = seenBlock
	}
	v.seen.Add(now, seenWidth, i, 1)
}

// entry is one tracked value in the table.
type entry = lru.Entry[value]

func newTable(r *rule, capacity int) *lru.Cache[value] {
	return lru.New(lru.Options[value]{Cap: capacity, Full: lru.Refuse, Init: r.initValue, Free: r.freeAt})
}

// initValue sets up a value seen for the first time (or again after its
// eviction): items are matched on the whole value, before any digest, once
// per value tracked rather than per call.
func (r *rule) initValue(v *value, key string) {
	v.param = r.paramOf(key) // 0 (the rule's count) when no item matches
	if r.kind != kindInFlight {
		v.state.Store(idle)
	}
}

// freeAt is when dropping v loses nothing a caller holds: never while a call
// is in flight (concurrency), once its queue is empty (throttle), at once for
// a bucket, which comes back full, as documented.
func (r *rule) freeAt(v *value) int64 {
	switch r.kind {
	case kindInFlight:
		if v.state.Load() != 0 {
			return math.MaxInt64
		}
	case kindQueue:
		// Only calls still queued pin a value. A value whose last pass was
		// under one spacing ago may go, like a bucket that is not full: its
		// next call then passes at once. Pinning it too would let a flood of
		// more than maxTrackedValues values per spacing block every new value.
		return v.state.Load()
	}
	return math.MinInt64
}
