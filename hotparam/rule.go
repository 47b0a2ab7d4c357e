package hotparam

import (
	"math"
	"time"

	"sluice/config"
	"sluice/internal/lru"
	"sluice/internal/match"
	"sluice/internal/throttle"
	"sluice/limiter"
)

// kind is what a rule does with a value's state word.
type kind uint8

const (
	// kindBucket: grade qps, reject. state is the bucket's theoretical arrival
	// time (GCRA): the bucket is full when state <= now, and a call of n
	// tokens passes when max(state, now) + n*emission - now <= tau.
	kindBucket kind = iota
	// kindQueue: grade qps, throttle. state is the instant of the latest
	// scheduled pass; the next one is due emission*n later.
	kindQueue
	// kindInFlight: grade concurrency. state is the number of calls in flight.
	kindInFlight
)

// param is a threshold of a rule: its count or an item's.
type param struct {
	count    float64
	emission float64 // nanoseconds per token: durationSec / count
	tau      int64   // bucket: (count + burstCount) * emission, how far state may run ahead of now
	inFlight int64   // concurrency: at most this many calls in flight
	never    bool    // count is 0: every call is blocked
}

// rule is the compiled, stateful form of one config.ParamRule. Everything but
// the table is immutable after compile; the table holds per-value state and is
// shared with the next snapshot when the rule's definition is unchanged.
type rule struct {
	// cfg is the rule as compiled: what a TokenService is asked about. Its
	// own allocation, not part of rule: a TokenService may keep the
	// pointer (cluster's spec cache), which must not keep the rule's value
	// table alive after a reload dropped it.
	cfg      *config.ParamRule
	cluster  bool // clusterMode (kindBucket): values are counted by the Checker's TokenService
	calendar bool // window day or month: the TokenService's calendar quota (AcquireQuota)
	resource string
	key      config.Key
	match    match.Matcher // the values the rule limits (the zero Matcher: all)
	kind     kind
	dryRun   bool
	window   time.Duration    // durationSec, for Quota.Window
	maxQueue int64            // throttle: maxQueueingTimeMs in nanoseconds
	params   []param          // params[0] is the rule's count, params[i] is items[i-1]
	items    map[string]int32 // exact items: value -> index into params
	classes  []class          // items with a match, in file order
	table    *lru.Cache[value]
	// after: countOn failure or responseHeader:NAME, the call's tokens are
	// taken after its answer (kindBucket only): failures are the statuses
	// that take them (countOn failure), header the NAME whose figure does
	// ("": countOn failure).
	after    bool
	header   string
	failures config.StatusSet
}

// class is an item that matches a class of values (prefix, contains,
// regex, cidr): each matching value gets params[param], in its own bucket.
type class struct {
	m     match.Matcher
	param int32
}

// paramOf is the index into params of a value seen for the first time: the
// first item in file order that matches it (an exact item by the value
// itself, a class by its matcher), else 0, the rule's count. Exact items
// are one map lookup; classes are tried only up to the exact item's place.
func (r *rule) paramOf(v string) int32 {
	p := r.items[v]
	for i := range r.classes {
		c := &r.classes[i]
		if p != 0 && c.param > p {
			break
		}
		if c.m.Match(v) {
			return c.param
		}
	}
	return p
}

// outcome is one rule's decision for one call.
type outcome struct {
	blocked bool
	took    bool  // state was taken and must be released by Exit or Cancel
	wait    int64 // throttle: how long the call waits before it goes
	retry   int64 // blocked: until a retry may pass (0 unknown, neverPasses)
	undo    int64 // what Cancel gives back: bucket cost, queue spacing
	sched   int64 // queue: the slot (pass instant) this call took
	// A bucket's quota for RateLimit headers: tokens left after the call and
	// until one more is there (Reset). p is nil for other kinds.
	p         *param
	remaining float64
	reset     int64
	period    int64   // a calendar quota's period, a cluster window's widened under one call (0: the rule's window)
	limit     float64 // the quota's limit, when not p.count (0): a cluster window's
	// A pass a TokenReturner decided: the stamp of its tokens (0: none to
	// give back), the value as kept past the caller's buffer and the
	// count the TokenReturner was asked with.
	stamp int64
	kept  string
	asked float64
}

// neverPasses is a blocked outcome's retry when no retry of the call can
// pass (an item of count 0, more tokens than the bucket holds): neither
// Retry-After nor a RateLimit t can name a moment.
const neverPasses = -1

// enter decides one call of n tokens for value state e at now and, unless it
// is blocked, takes what it needs. share > 1 (a global cluster rule falling
// back while Redis fails): a bucket holds this gateway's 1/share of the
// count. The caller holds e's shard lock, so enters of one value are
// serialised; the CAS loops only race Exit and Cancel.
func (r *rule) enter(e *value, now, n int64, share int) outcome {
	p := &r.params[e.param]
	if r.after {
		return r.enterAfter(e, p, now, n, share)
	}
	switch r.kind {
	case kindInFlight:
		return r.enterInFlight(e, p)
	case kindQueue:
		return r.enterQueue(e, p, now, n)
	}
	return r.enterBucket(e, p, now, n, share)
}

// bucketOf is p's bucket for a call of n tokens: the cost, the capacity
// (tau) and the count, each for 1/share of the count when share > 1 (never
// below one token: a count smaller than the gateways still lets each
// gateway pass one call a durationSec).
func bucketOf(p *param, n int64, share int) (cost, tau int64, count, emission float64) {
	if p.never {
		return costOf(p, n), p.tau, p.count, p.emission
	}
	if share <= 1 {
		return bucketCost(n, p.emission), p.tau, p.count, p.emission
	}
	count = max(p.count/float64(share), min(p.count, 1))
	emission = p.emission * p.count / count
	return bucketCost(n, emission), nanos(max(count, 1) * emission), count, emission
}

// bucketCost is what n tokens take from a bucket, in nanoseconds, rounded
// down: a full bucket (tau, rounded to the nearest) must hold count tokens
// at once, and count costs rounded up do not fit in it (six tokens of 1e9/6
// ns, each rounded to 166666667, are 2 ns more than a second, and a rule of 6
// a second passed 5). Rounding down gives a rate at most 1 ns a token faster.
func bucketCost(n int64, emission float64) int64 {
	ns := float64(n) * emission
	if ns >= forever {
		return forever
	}
	return int64(ns)
}

func (r *rule) enterBucket(e *value, p *param, now, n int64, share int) outcome {
	cost, tau, count, emission := bucketOf(p, n, share)
	if p.never || cost > tau {
		// More than the bucket ever holds: no retry can pass.
		return outcome{blocked: true, p: p, retry: neverPasses}
	}
	for {
		tat := e.state.Load()
		next := max(tat, now) + cost
		if ahead := next - now; ahead > tau {
			retry := ahead - tau
			return outcome{blocked: true, retry: retry, p: p, reset: retry}
		}
		if e.state.CompareAndSwap(tat, next) {
			o := bucketLeft(p, next, now, tau, count, emission)
			o.took, o.undo = true, cost
			return o
		}
	}
}

// bucketLeft is what a bucket whose state word is next leaves at now: the
// tokens remaining and, with none, the time until one is back (a debt
// included). The bucket holds count+burstCount, but the policy a client is
// shown is count per window (RateLimit-Policy q), and r is what is left of
// that quota: r above q reads as a broken policy. The burst still passes;
// it is just not promised. (A count below 1 is shown as 1 per longer
// window, and the bucket always holds a token.)
func bucketLeft(p *param, next, now, tau int64, count, emission float64) outcome {
	room := tau - (next - now) // nanoseconds of tokens left
	o := outcome{p: p, remaining: min(max(math.Floor(float64(room)/emission), 0), max(count, 1))}
	if o.remaining < 1 {
		o.reset = int64(math.Ceil(emission)) - room
	}
	return o
}

// held is what a call of r holds from its entry: an after-answer rule's
// check (checkOf), else its acquireCount n.
func (r *rule) held(n int64) int64 {
	if r.after {
		return r.checkOf(n)
	}
	return n
}

// checkOf is how many tokens a call of an after-answer rule must find in
// its value's bucket to be let in: the acquireCount a failure takes, or one
// token for a cost the answer will tell (so the last call may overdraw).
func (r *rule) checkOf(n int64) int64 {
	if r.header != "" {
		return 1
	}
	return n
}

// enterAfter lets a call of an after-answer rule in while its value's
// bucket holds checkOf(n) tokens, and holds them while the call is in
// flight; the answer decides what is taken (Token.Exit). A countOn failure
// call's acquireCount is given back unless its answer is a failure; a
// figure's call keeps its one token toward the figure, and the rest is
// taken then (chargeDebt). Were calls let in on a look, a client could send
// any number of guesses, or of costly calls, at once before the first
// answer counted. A dryRun rule lets a call it would block through
// uncharged: enforced, that call never reaches the upstream, and a dryRun
// rule's state evolves as the enforced rule's would.
func (r *rule) enterAfter(e *value, p *param, now, n int64, share int) outcome {
	return r.enterBucket(e, p, now, r.checkOf(n), share)
}

// chargeDebt takes n tokens from e's bucket of 1/share of the count after
// a call's answer, whether or not they are there: the bucket may go into
// debt, which later refills pay back before a call is let in again. One
// charge takes at most the full bucket (count+burstCount tokens; n is what
// the figure asks beyond the token held in flight), and the debt never
// passes one full bucket: a figure from the upstream, however large, keeps
// a value out for at most about two buckets' refill (two durationSec for a
// count of 1 or more).
func (r *rule) chargeDebt(e *value, p *param, now, n int64, share int) {
	if p.never || n <= 0 {
		return
	}
	cost, tau, _, _ := bucketOf(p, n, share)
	for {
		tat := e.state.Load()
		next := inDebt(tat, now, cost, tau)
		if next <= tat || e.state.CompareAndSwap(tat, next) {
			return
		}
	}
}

// inDebt is a bucket's state word tat once charged cost at now, whether
// or not the tokens are there: one charge takes at most the full bucket
// (tau), and the debt never passes one full bucket.
func inDebt(tat, now, cost, tau int64) int64 {
	return min(max(tat, now)+min(cost, tau), now+2*tau)
}

// chargeBucket counts n tokens the cluster passed in e's bucket of 1/share
// of the count, without refusing (the bucket fills up to full, no more): so
// that should Redis fail, the local fallback sees what this gateway passed
// lately rather than granting its whole share on top of it.
func (r *rule) chargeBucket(e *value, p *param, now, n int64, share int) {
	if p.never {
		return
	}
	cost, tau, _, _ := bucketOf(p, n, share)
	for {
		tat := e.state.Load()
		next := min(max(tat, now)+cost, now+tau)
		if next <= tat || e.state.CompareAndSwap(tat, next) {
			return
		}
	}
}

func (r *rule) quota(o *outcome, ord int) limiter.Quota {
	w := r.window
	if o.period > 0 {
		w = time.Duration(o.period)
	}
	limit := o.p.count
	if o.limit > 0 {
		limit = o.limit
	}
	return limiter.Quota{
		Policy:    r.resource,
		Kind:      limiter.ReasonParam,
		Rule:      ord,
		Limit:     limit,
		Window:    w,
		Remaining: o.remaining,
		Reset:     time.Duration(o.reset),
	}
}

// enterQueue takes the call's slot in the value's virtual queue
// (internal/throttle, the one flow rules use): the state word is its tail.
func (r *rule) enterQueue(e *value, p *param, now, n int64) outcome {
	if p.never {
		return outcome{blocked: true}
	}
	cost := costOf(p, n)
	at, wait, ok := throttle.Take(&e.state, &e.holes, now, cost, r.maxQueue)
	if !ok {
		return outcome{blocked: true, retry: wait - r.maxQueue}
	}
	return outcome{took: true, wait: wait, undo: cost, sched: at}
}

func (r *rule) enterInFlight(e *value, p *param) outcome {
	for {
		cur := e.state.Load()
		if cur >= p.inFlight && !r.dryRun {
			return outcome{blocked: true}
		}
		if e.state.CompareAndSwap(cur, cur+1) {
			// A dryRun rule keeps counting real calls past its limit and
			// reports the would-be block.
			return outcome{blocked: cur >= p.inFlight, took: true}
		}
	}
}

// costOf is n tokens in nanoseconds of the value's rate, computed in floating
// point from the exact rate so that sub-millisecond spacings stay exact
// (Sentinel rounds them to whole milliseconds).
func costOf(p *param, n int64) int64 {
	if p.never {
		return forever
	}
	return nanos(float64(n) * p.emission)
}

// forever is a span no call waits for, small enough that adding it to any
// instant or state word cannot overflow.
const forever = math.MaxInt64 / 4

// nanos rounds ns to an int64, saturating at forever (a count of 1e-12 per
// second must not overflow the conversion).
func nanos(ns float64) int64 {
	if ns >= forever {
		return forever
	}
	return int64(math.Round(ns))
}
