package cluster

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxBlocked bounds blockCache: origins come from requests.
const maxBlocked = 1 << 16

type blockKey struct {
	spec   *ruleSpec
	origin string
}

type blockEntry struct {
	until time.Duration // on the Service's monotonic timeline
	n     int64         // the smallest n the cluster refused
	// retry is when the refused call could pass, as Redis said: past
	// until when the refusal is kept only briefly (a countOn failure
	// rule's held passes may come back sooner), and what a refusal from
	// the cache tells its client to wait.
	retry time.Duration
}

// blockCache remembers windows the cluster reported full. The script says
// exactly when a window can take a call's n tokens (when the slot in the way
// leaves the interval); until then a call asking for as many tokens or more
// would be refused too and is answered locally: under overload, blocked calls
// cost no round trip and Redis sees about one refused call per freed slot
// from each gateway. The instant is measured from the call's start, which
// precedes the script's clock read, so the cache never outlives the block;
// it can only be too strict when an avgLocal gateway joins meanwhile.
// The zero value is ready; it is safe for concurrent use.
type blockCache struct {
	mu sync.Mutex
	m  map[blockKey]blockEntry // guarded by mu; at most maxBlocked entries
	// gen counts forgets and clears (written under mu): a refusal Redis
	// decided before a lift may arrive after the lift was noted, and must
	// not be remembered then.
	gen atomic.Uint64
}

// generation is read when a call starts, before Redis decides it; add
// drops the call's refusal if a forget or clear came in between.
func (c *blockCache) generation() uint64 { return c.gen.Load() }

// blocked reports whether n tokens of spec/origin are known to be refused
// at now, and then when the call could pass.
func (c *blockCache) blocked(spec *ruleSpec, origin string, n int64, now time.Duration) (bool, time.Duration) {
	k := blockKey{spec, origin}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return false, 0
	}
	if now >= e.until {
		delete(c.m, k)
		return false, 0
	}
	return n >= e.n, e.retry
}

// add records at now that n tokens are refused until the instant until
// (the call could pass at retry, until or later), unless the cache was
// forgotten or cleared since generation gen.
func (c *blockCache) add(spec *ruleSpec, origin string, n int64, now, until, retry time.Duration, gen uint64) {
	k := blockKey{spec, origin}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != gen {
		return // decided before a lift: Redis may have emptied the window since
	}
	if c.m == nil {
		c.m = make(map[blockKey]blockEntry)
	}
	if e, ok := c.m[k]; ok && e.until >= until && e.n <= n {
		return // already refuses as many tokens or fewer, as long or longer
	}
	// Else the new refusal replaces the entry. Merging a smaller call's
	// sooner instant into a larger one's (n 1 from one, until from the
	// other) refused calls Redis would pass: one entry can say only one
	// (n, until), and each on its own is true.
	if len(c.m) >= maxBlocked {
		c.sweep(now)
		if len(c.m) >= maxBlocked {
			return // every entry still live: answer from Redis instead
		}
	}
	if spec.perValue {
		k.origin = strings.Clone(origin) // a param value may alias the caller's buffer
	}
	c.m[k] = blockEntry{until: until, n: n, retry: max(retry, until)}
}

// sweep drops entries that ended by now.
func (c *blockCache) sweep(now time.Duration) {
	for k, e := range c.m {
		if e.until <= now {
			delete(c.m, k)
		}
	}
}

// forget drops what is remembered of spec's window for origin. An
// operator who emptied the window (always) also voids the refusals in
// flight, so that none is noted after; tokens given back void them only
// when something was noted: a refusal in flight may still be noted then,
// which only refuses more, until its instant at most.
func (c *blockCache) forget(spec *ruleSpec, origin string, always bool) {
	k := blockKey{spec, origin}
	c.mu.Lock()
	if _, noted := c.m[k]; noted || always {
		c.gen.Add(1)
		delete(c.m, k)
	}
	c.mu.Unlock()
}

// clear forgets every window noted full.
func (c *blockCache) clear() {
	c.mu.Lock()
	c.gen.Add(1)
	clear(c.m)
	c.mu.Unlock()
}
