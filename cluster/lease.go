package cluster

import (
	"strings"
	"sync"
	"time"
)

// Token leasing. A call that goes to Redis also states its window's recent
// demand on this gateway (tokens per second). Far from the count (this
// gateway's demand would fill at most half the window in an interval, and the
// window stays at most half full), the script counts demand x L extra
// tokens for this gateway (L: see acquireSrc; at most statIntervalMs/40, a
// lease at most count/2048 tokens), stamped with the last instant they may
// be used (L after the script ran), and
// says how long that is. Calls until then take those tokens locally without
// a round trip. Since a leased token is used before its stamp, the window
// keeps it at least an interval after its use, so no real interval of
// statIntervalMs holds more than count passes, as without leasing. A token
// left unused would count as a pass that never happened, for an interval:
// the gateway returns it (with its stamp) on its next call on the window,
// once, and the script removes as many slots with that stamp. A pass that
// a later check blocks is returned the same way (giveBack), with the
// stamp the script gave its own tokens, whether or not the window leases.

const (
	// minSample is the shortest stretch over which demand is measured; over
	// shorter ones the previous estimate stands.
	minSample = 5 * time.Millisecond
	// maxLeased bounds leaseCache like blockCache: origins come from requests.
	maxLeased = 1 << 16
)

// leaseEntry is one window's lease and demand on this gateway.
type leaseEntry struct {
	tokens  int64         // leased and not yet used
	until   time.Duration // tokens are void from then on (the instant they are stamped with)
	stamp   int64         // their stamp in the window (Redis µs)
	void    int64         // leased tokens left unused, or given back, to return with the next call to Redis
	voidAt  int64         // their stamp: the earliest, if of several leases
	asked   int64         // tokens asked for since since
	since   time.Duration
	rate    int64         // tokens per second asked for over the last sample
	pending time.Duration // while a lease request is in flight: when it gives up; else 0
	// What the window had left when the lease was granted, besides the
	// lease (-1: not asked), and when its oldest pass was to leave it.
	left   int64
	leaves time.Duration
}

// leaseCache holds leased tokens per window. The zero value is ready; it is
// safe for concurrent use. Instants are on the Service's monotonic timeline.
type leaseCache struct {
	mu    sync.Mutex
	m     map[blockKey]*leaseEntry // guarded by mu; at most maxLeased entries
	swept time.Duration            // last sweep of a full map; one a second at most, so many origins cannot make every call a sweep
}

// take uses n leased tokens of spec/origin at now if there are enough;
// left and reset then say what the window had left when the lease was
// granted plus the lease's unused tokens, and how long until its oldest
// pass was to leave (left -1: not known). Otherwise the call goes to Redis
// and demand is what it should ask a lease for (tokens per second; 0: ask
// none, because the demand is unknown or another call's lease request is
// in flight until giveUp). A pass also says the stamp of the lease its
// tokens came from, by which they are given back (giveBack).
func (c *leaseCache) take(spec *ruleSpec, origin string, n int64, now, giveUp time.Duration) (ok bool, demand, left int64, reset time.Duration, stamp int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(spec, origin, now)
	if e == nil {
		return false, 0, -1, 0, 0
	}
	e.asked += n
	if now < e.until && e.tokens >= n {
		e.tokens -= n
		if e.left < 0 {
			return true, 0, -1, 0, e.stamp
		}
		return true, 0, e.left + e.tokens, max(e.leaves-now, 0), e.stamp
	}
	if now >= e.until {
		e.unused()
	}
	if dt := now - e.since; dt >= minSample {
		e.rate = e.asked * int64(time.Second) / int64(dt)
		e.asked, e.since = 0, now
	}
	if e.rate == 0 || now < e.pending {
		return false, 0, -1, 0, 0
	}
	e.pending = giveUp
	return false, e.rate, -1, 0, 0
}

// entry returns spec/origin's entry, made at now if new; nil when the
// cache is full of entries still in use. The caller holds c.mu.
func (c *leaseCache) entry(spec *ruleSpec, origin string, now time.Duration) *leaseEntry {
	k := blockKey{spec, origin}
	if e := c.m[k]; e != nil {
		return e
	}
	if c.m == nil {
		c.m = make(map[blockKey]*leaseEntry)
	}
	if len(c.m) >= maxLeased {
		if c.swept != 0 && now-c.swept < time.Second {
			return nil
		}
		c.swept = max(now, 1)
		c.sweep(now)
		if len(c.m) >= maxLeased {
			return nil
		}
	}
	e := &leaseEntry{since: now, left: -1}
	if spec.perValue {
		k.origin = strings.Clone(origin) // a param value may alias the caller's buffer
	}
	c.m[k] = e
	return e
}

// giveBack adds n tokens stamped stamp (Redis µs) in spec/origin's window
// to those to return with its next call to Redis: a pass a later check
// blocked, taken from Redis or from a lease. They are returned with the
// earliest stamp of those pending, which removes no slot a real pass
// needs. When the cache is full (or the entry is swept before that call)
// they are lost: they stay counted until they leave the window, which only
// ever passes less.
func (c *leaseCache) giveBack(spec *ruleSpec, origin string, n, stamp int64, now time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(spec, origin, now)
	if e == nil {
		return
	}
	if e.void == 0 || stamp < e.voidAt {
		e.voidAt = stamp
	}
	e.void += n
}

// held is what spec/origin's window in Redis counts that holds no pass of
// this gateway's: tokens leased and still usable at now, and tokens to
// return with its next call to Redis (given back, or left unused). A read
// of the window less these is what the next call here finds.
func (c *leaseCache) held(spec *ruleSpec, origin string, now time.Duration) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[blockKey{spec, origin}]
	if e == nil {
		return 0
	}
	n := e.void
	if now < e.until {
		n += e.tokens
	}
	return n
}

// unused moves what is left of the lease to the tokens to return.
func (e *leaseEntry) unused() {
	if e.tokens <= 0 {
		return
	}
	if e.void == 0 || e.stamp < e.voidAt {
		e.voidAt = e.stamp
	}
	e.void += e.tokens
	e.tokens = 0
}

// hasVoid reports whether spec/origin has tokens to return with its next
// call to Redis.
func (c *leaseCache) hasVoid(spec *ruleSpec, origin string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[blockKey{spec, origin}]
	return e != nil && e.void > 0
}

// popVoid returns, once, the tokens of spec/origin left unused (leased,
// or given back) and the stamp to find them by.
func (c *leaseCache) popVoid(spec *ruleSpec, origin string) (tokens, stamp int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[blockKey{spec, origin}]
	if e == nil || e.void == 0 {
		return 0, 0
	}
	tokens, stamp = e.void, e.voidAt
	e.void, e.voidAt = 0, 0
	return tokens, stamp
}

// grant records the answer to a lease request made at now: tokens extra
// tokens usable until the instant until, stamped stamp in the window (0
// tokens: none granted), and what the window had left besides them (left,
// -1: not asked) and when its oldest pass leaves it. It also ends the
// request, so the next call may ask again.
func (c *leaseCache) grant(spec *ruleSpec, origin string, tokens, stamp int64, now, until time.Duration, left int64, leaves time.Duration) {
	k := blockKey{spec, origin}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[k]
	if e == nil {
		return // swept meanwhile: the tokens are lost, which is safe
	}
	e.pending = 0
	if tokens <= 0 || until <= now {
		return
	}
	e.left, e.leaves = left, leaves // the newest reading
	if e.tokens > 0 && e.until > now && until <= e.until {
		// Tokens of both leases are usable before both deadlines.
		e.tokens += tokens
		e.until = until
		e.stamp = min(e.stamp, stamp)
		return
	}
	// A later lease replaces what is left of the earlier one, which ends
	// sooner anyway; that rest is returned.
	e.unused()
	e.tokens, e.until, e.stamp = tokens, until, stamp
}

// sweep drops entries with no live lease, no request in flight and no call
// for a second; tokens they would have returned stay counted, which only
// ever passes less.
func (c *leaseCache) sweep(now time.Duration) {
	for k, e := range c.m {
		if e.until <= now && e.pending <= now && now-e.since > time.Second {
			delete(c.m, k)
		}
	}
}
