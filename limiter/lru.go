package limiter

import (
	"math"

	"sluice/internal/lru"
)

// pinner is a value an origin LRU holds: busy values (calls in flight) are
// not evicted.
type pinner interface {
	pin()
	busy() bool
}

// newLRU returns the map of origins to state of one node or "other" rule,
// keeping at most max entries: past the cap it evicts the least recently used
// entry that is not busy; if those it looks at are all busy it grows, so
// memory stays bounded by max plus the calls in flight (statistics must
// never refuse a call). An origin longer than lru.MaxKeyLen is kept as its
// first bytes and a digest (see internal/lru).
func newLRU[V pinner](max int, fresh func() V) *lru.Cache[V] {
	return lru.New(lru.Options[V]{
		Cap:  max,
		Full: lru.Grow,
		Init: func(v *V, _ string) { *v = fresh() },
		Free: func(v *V) int64 {
			if (*v).busy() {
				return math.MaxInt64
			}
			return math.MinInt64
		},
	})
}

// acquire returns origin's value in c, creating it, pinned: the caller must
// unpin it. A tracked origin costs no allocation.
func acquire[V pinner](c *lru.Cache[V], origin string, now int64) V {
	e, sh := c.Get(origin, now)
	v := e.V
	v.pin()
	sh.Unlock()
	return v
}
