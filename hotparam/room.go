package hotparam

import (
	"time"

	"sluice/limiter"
)

// Room is when a call of n tokens with values v, which some rule refused
// retry ns from now (0: it cannot tell), would find room in every value of
// every rule of the checker too, counting nothing: retry, or later when a
// value needs longer. A check stops at the first value refused, and a
// client told to come back when that one has room could find another
// empty; SPEC section 4 promises that a client that waits Retry-After and
// retries is passed. A value that needs longer hands sink (nil: none) its
// quota, last, so that the refusal's RateLimit names it. A value the rule
// never lets the call in for (an item of count 0, more tokens than its
// bucket holds) makes it -1: there is no moment to tell. Left out are the
// rules that cannot tell: in flight, dryRun, and those whose state is in
// Redis (clusterMode, calendar quotas). A value not tracked has all its
// room, unless it never passes.
func (c *Checker) Room(now int64, v Values, n, retry int64, sink limiter.QuotaSink) int64 {
	if c == nil || retry <= 0 {
		return retry
	}
	n = max(n, 1)
	for i, r := range c.rules {
		if r.dryRun || r.kind == kindInFlight || r.calendar || (r.cluster && c.cluster != nil) {
			continue
		}
		vals, ok := v.Values(r.key)
		if !ok {
			continue
		}
		for _, val := range vals {
			if !r.match.Match(val) {
				continue
			}
			e, sh := r.table.Peek(val)
			// A value not tracked is read as its first call would find it.
			p, st := &r.params[r.paramOf(val)], int64(idle)
			if e != nil {
				p, st = &r.params[e.V.param], e.V.state.Load()
			}
			wait := r.waitFor(p, st, now, n)
			sh.Unlock()
			if wait < 0 {
				return -1
			}
			if wait <= retry {
				continue
			}
			retry = wait
			if sink != nil {
				// The value aliases the source's buffer: the sink hashes
				// it now, before the next source read.
				sink.Quota(limiter.Quota{Policy: r.resource, Kind: limiter.ReasonParam, Rule: i, Limit: p.count,
					Window: r.window, Reset: time.Duration(wait), Key: val})
			}
		}
	}
	return retry
}

// waitFor is how long after now a call of n tokens would wait before p's
// state word st let it in, past what the rule lets a call wait (0: it
// would be let in now; -1: never); enterBucket's and enterQueue's refusal,
// read without taking. A queue's slots given back (holes) are not looked
// at: the wait it says is the latest the queue needs.
func (r *rule) waitFor(p *param, st, now, n int64) int64 {
	if p.never {
		return -1
	}
	if r.kind == kindQueue {
		if wait := max(st+costOf(p, n), now) - now; wait > r.maxQueue {
			return wait - r.maxQueue
		}
		return 0
	}
	if r.after {
		n = r.checkOf(n)
	}
	cost, tau, _, _ := bucketOf(p, n, 0)
	if cost > tau {
		return -1
	}
	if ahead := max(st, now) + cost - now; ahead > tau {
		return ahead - tau
	}
	return 0
}
