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

// carry fills dst, a value of r, with what src, the same value of o (the
// rule r replaces, of the same stateID), holds at now, and reports whether
// there is anything to carry: tokens spent, calls queued, or passes and
// blocks of the last minute for operators. share and was are what r's and
// o's local buckets divide the count by (rule.localShare). The caller
// holds src's shard lock; o may still be serving, so src's words are read
// once each.
func (r *rule) carry(o *rule, dst, src *value, now int64, share, was int) bool {
	dst.param = src.param // its item's index: stateID holds the items, in order
	dst.seen = src.seen
	dst.state.Store(idle)
	p, old := &r.params[src.param], &o.params[src.param]
	busy := false
	// A count of 0 blocks a value without touching its state: nothing was
	// spent under it, and nothing spent counts under it.
	if st := src.state.Load(); !p.never && !old.never {
		switch r.kind {
		case kindBucket:
			if busy = st > now; busy {
				dst.state.Store(now + spentAgain(st-now, old, p, was, share))
			}
		case kindQueue:
			// The calls queued keep their slots, and the next queues one
			// new spacing after the last. The old queue's holes stay
			// behind: a hole is a slot of the old spacing, too short for
			// a call of a lowered rate (throttle takes only a hole that
			// fits), and the calls that give slots back give them to the
			// old value. The new queue leaves at most those slots unused;
			// it never spaces calls closer than its rate.
			if busy = st+costOf(p, 1) > now; busy {
				dst.state.Store(st)
			}
		}
	}
	alone := src.alone.Load()
	switch {
	case r.calendar:
		// The same period (stateID): its end, and whether this gateway
		// passed calls alone in it, which Redis never counted.
		dst.alone.Store(alone)
		busy = busy || alone&madeAlone != 0
	case r.cluster && alone > now:
		// Passes this gateway decided alone while Redis failed leave the
		// new window a new durationSec after they were made.
		if a := alone - int64(o.window) + int64(r.window); a > now {
			dst.alone.Store(a)
			busy = true
		}
	}
	passes, blocks := src.seen.Sum(now, seenWidth)
	return busy || passes+blocks > 0
}

// spentAgain is how far past now p's bucket (of 1/share of its count) runs
// for a value whose bucket under old (of 1/was of its count) ran ahead ns
// past now: the
// tokens the value spent stay spent, up to p's full bucket, and a debt
// past old's full bucket (a cost charged after the answer, chargeDebt)
// stays owed on top, up to chargeDebt's bound of one full bucket. A count
// lowered from 20 to 10 leaves a value that spent 20 nothing, one that
// spent 5 five; raised to 30, one that spent 20 ten. Rounded down, as a
// call's cost is (bucketCost): 2 tokens of 1e9/3 ns rounded to the nearest
// left a bucket of 3 a second 1 ns short of its third token.
func spentAgain(ahead int64, old, p *param, was, share int) int64 {
	_, tau0, _, e0 := bucketOf(old, 1, was)
	_, tau1, _, e1 := bucketOf(p, 1, share)
	full0, full1 := float64(tau0)/e0, float64(tau1)/e1
	spent := float64(ahead) / e0
	return int64(min(spent, full1+max(spent-full0, 0), 2*full1) * e1)
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
