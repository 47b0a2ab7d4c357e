package limiter

import (
	"math"
	"time"

	"sluice/config"
	"sluice/limiter/window"
)

// Checker checks calls to one resource entering through one entrance. Build
// it with Flow.Checker once per route (not on the hot path); the zero Checker
// is not usable. Enter and Block are safe for concurrent use and allocate
// nothing once an origin has been seen (a new origin allocates its entry).
type Checker struct {
	resource string
	res      *resNode
	ent      *statNode
	rules    []checkRule // the rules that can apply through this entrance, in file order
	named    map[string]bool
	cluster  TokenService
	skew     int64         // ns: the cluster's ResumeSkew, added to the alone guard
	giver    TokenReturner // cluster, if it can give tokens back; else nil
	// queued: a throttle rule applies through this entrance, so a call may
	// be forwarded after it is decided, and its qps reject rules reserve
	// their passes at that moment (Token.fwd), not when decided.
	queued bool
}

type checkRule struct {
	*rule
	refNode *statNode // relate: the related resource's node
	ord     int       // the rule's place among the resource's rules (Quota.Rule)
}

// Checker returns the checker of calls to resource through entrance. An
// unknown resource gets a Checker with no rules that still keeps statistics.
func (f *Flow) Checker(resource, entrance string) *Checker {
	c := &Checker{resource: resource, res: f.resNode(resource), named: f.named[resource], cluster: f.opts.Cluster}
	if rs, ok := f.opts.Cluster.(ResumeSkewer); ok {
		c.skew = int64(rs.ResumeSkew())
	}
	c.giver, _ = f.opts.Cluster.(TokenReturner)
	c.ent = f.entNode(entrance, resource)
	for i, r := range f.byRes[resource] {
		if r.chain != "" && r.chain != entrance {
			continue
		}
		cr := checkRule{rule: r, ord: i}
		if r.ref != "" {
			cr.refNode = f.resNode(r.ref).all
		} else if b := r.st.def.behavior; b == bThrottle || b == bWarmUpThrottle {
			c.queued = true
		}
		c.rules = append(c.rules, cr)
	}
	return c
}

// maxInline is how many rule states a Token holds without allocating.
const maxInline = 5

// Token is a passed call. It must be ended exactly once, with Exit or Cancel;
// the zero Token (a blocked call's) ends as a no-op. A Token is a value owned
// by one request; it is not safe for concurrent use.
type Token struct {
	c      *Checker
	origin *statNode // (resource, origin) node, pinned; nil for origin ""
	enter  int64
	n      int64
	nheld  int
	held   [maxInline]heldState
	more   []heldState // past maxInline (rare: allocates)
	sink   QuotaSink   // EnterPending's, for Reserve
	// fwd is when the call's throttle rules forward it (enter + Verdict.Wait):
	// its pending passes are reserved no earlier (span), or a pass counted
	// before the call reaches the upstream could leave the window first.
	fwd int64
	// The passes clusterMode rules took in the token service, given back
	// if the call does not go (TokenReturner).
	ncl    int
	cl     [maxInlineCluster]clusterHeld
	moreCl []clusterHeld // past maxInlineCluster (rare: allocates)
}

// maxInlineCluster is how many cluster passes a Token holds without
// allocating.
const maxInlineCluster = 2

// clusterHeld is a pass a clusterMode rule took in the token service.
type clusterHeld struct {
	rule  *config.FlowRule
	key   string // "" or the origin, which the caller keeps for the call
	stamp int64
}

// holdCluster keeps a cluster pass to give back should the call not go.
func (t *Token) holdCluster(rule *config.FlowRule, key string, stamp int64) {
	pushInline(t.cl[:], &t.moreCl, t.ncl, clusterHeld{rule: rule, key: key, stamp: stamp})
	t.ncl++
}

// pushInline sets element n of a list kept in inline (no allocation)
// and, past its length, in *more.
func pushInline[T any](inline []T, more *[]T, n int, v T) {
	if n < len(inline) {
		inline[n] = v
	} else {
		*more = append(*more, v)
	}
}

// atInline is element i of a list pushInline keeps.
func atInline[T any](inline, more []T, i int) *T {
	if i < len(inline) {
		return &inline[i]
	}
	return &more[i-len(inline)]
}

// giveBack gives the token service back the passes its clusterMode rules
// took for a call that does not go.
func (t *Token) giveBack() {
	for i := 0; i < t.ncl; i++ {
		h := atInline(t.cl[:], t.moreCl, i)
		t.c.giver.GiveBackFlow(h.rule, h.key, t.n, h.stamp)
	}
	t.ncl, t.moreCl = 0, nil
}

// heldState is one rule state a call holds, with the virtual-queue slot it
// took there (throttle behaviours), which Cancel or a later block gives back:
// every throttle queue the call joined, not just the first, or each call that
// does not go would leave an empty slot in the others.
type heldState struct {
	s    *keyState
	at   int64 // the slot taken; math.MinInt64 if none; pendingAt: prio, not yet reserved
	span int64 // ns of spacing the slot stands for
	// prio: a reject rule of a prioritized call, whose pass is reserved at
	// at (EnterPrioritized) rather than counted at enter.
	prio bool
	// dry: a dryRun reject rule of a prioritized call, held pending like
	// prio's but decided alone (reserveDry), so that it never delays or
	// refuses the call; cleared once decided.
	dry bool
	// prio: a global cluster rule deciding locally is this gateway's
	// 1/share of the count, as for a plain call (outcome.share).
	share int32
	ord   int // prio: the rule's place among its resource's rules (Quota.Rule)
}

// pendingAt marks a prioritized call's reject rule whose pass is not
// reserved yet: nothing to give back.
const pendingAt = math.MaxInt64

func (t *Token) hold(s *keyState, o *outcome) {
	h := heldState{s: s, at: math.MinInt64}
	if o.at != math.MinInt64 && (s.def.behavior == bThrottle || s.def.behavior == bWarmUpThrottle) {
		h.at, h.span = o.at, o.span
	}
	pushInline(t.held[:], &t.more, t.nheld, h)
	t.nheld++
}

// holdPending holds s for a prioritized call's pass, reserved later
// against limit(share); dry for a dryRun rule's (reserveDry).
func (t *Token) holdPending(s *keyState, ord, share int, dry bool) {
	h := heldState{s: s, at: pendingAt, prio: !dry, dry: dry, ord: ord, share: int32(min(share, math.MaxInt32))}
	pushInline(t.held[:], &t.more, t.nheld, h)
	t.nheld++
}

// limit is what a prioritized call's pending pass is reserved against: the
// whole calls of the rule's window, or of this gateway's share of it.
func (h *heldState) limit() float64 {
	return math.Floor(shareOf(h.s.def.winLimit, int(h.share)))
}

func (t *Token) heldAt(i int) *heldState { return atInline(t.held[:], t.more, i) }

// Enter checks a call of n tokens (n < 1 counts as 1) from origin ("" = none)
// at now. Every applicable rule must pass, in file order; the first block
// decides and rolls back what earlier rules counted. A passed call is counted
// on every node and rule and its Token must be ended with Exit or Cancel.
// Verdict.Wait > 0 (throttle behaviours): the caller waits that long, then
// forwards. Where a throttle rule applies through the entrance, a qps
// reject rule counts the pass at that moment, not at now, as a prioritized
// call's is reserved (with no wait: span), and refuses the call if its
// window has no room then; a call that does not go must still be
// cancelled, which gives that pass back.
func (c *Checker) Enter(now int64, origin string, n int64) (t Token, v Verdict) {
	v = c.enter(&t, now, origin, n, -1, nil, false)
	return t, v
}

// EnterPrioritized is Enter for a prioritized call (Sentinel's
// entryWithPriority): where a qps reject rule has no room at now, the call
// is not refused if, within maxWait ns, a moment comes at which every reject
// rule of the call has room. Its pass is then reserved at the earliest such
// moment in each of their windows, so that no later call takes it and no
// real interval passes more than count, and Verdict.Wait says how long to
// wait for it (Verdict.Prioritized). A call that leaves while waiting must
// be cancelled: that gives the reserved passes back. A dryRun reject rule
// decides as it would enforced, without delaying or refusing the call
// (reserveDry). Other rules decide at now as in Enter; a pass is reserved
// no earlier than the call's throttle slot, the moment it is forwarded
// (span), and the call waits for the later of the two.
//
// Only local windows wait: a clusterMode rule decided by the token service
// refuses at once (in its local fallback it waits like a local rule).
// Above window.MaxSlots tokens a window's reserved pass takes a slot of its
// own, at most MaxSlots of them a window; past that a call is refused.
func (c *Checker) EnterPrioritized(now int64, origin string, n, maxWait int64) (t Token, v Verdict) {
	v = c.enter(&t, now, origin, n, max(maxWait, 0), nil, false)
	return t, v
}

// EnterQuotas is Enter (maxWait < 0) or EnterPrioritized (maxWait >= 0)
// that also hands sink (nil: none) the Quota of every qps rule that counts
// the call, the blocking one included (QuotaSink). It writes the Token to
// *t, whatever *t held: a caller that keeps the Token inside a larger value
// (the gateway's pooled exchange) saves copying its few hundred bytes.
func (c *Checker) EnterQuotas(t *Token, now int64, origin string, n, maxWait int64, sink QuotaSink) Verdict {
	return c.enter(t, now, origin, n, maxWait, sink, false)
}

// EnterPending is EnterPrioritized for a call that other checkers also
// count (an API group's rules besides its route's): every rule decides at
// now except the qps reject rules, whose passes the call holds pending.
// The caller must then reserve them, with the pending passes of the call's
// other checkers, in one Reserve: a pending pass counts nowhere until
// reserved. Pending dryRun rules count no would-be block in v: Reserve,
// or DecideDryRun before it, decides them. A Token without pending passes
// (no qps reject rule applies) passes through Reserve unchanged. It writes
// the Token to *t, as EnterQuotas does.
func (c *Checker) EnterPending(t *Token, now int64, origin string, n int64, sink QuotaSink) Verdict {
	return c.enter(t, now, origin, n, 0, sink, true)
}

// enter decides a call and writes its Token to *t (the zero Token when
// the call is blocked).
func (c *Checker) enter(t *Token, now int64, origin string, n, maxWait int64, sink QuotaSink, pending bool) (v Verdict) {
	if n < 1 {
		n = 1
	}
	*t = Token{c: c, enter: now, n: n}
	pend := false // a qps reject rule's pass is held pending
	if origin != "" {
		t.origin = acquire(c.res.origins, origin, now)
	}
	for i := range c.rules {
		r := &c.rules[i]
		var ks *keyState
		switch r.limit {
		case limitSpecific:
			if origin == "" {
				continue
			}
			if ks = r.st.byOrigin[origin]; ks == nil && (r.ref == "" || !r.apps[origin]) {
				continue // not one of the rule's origins (relate rules hold no state)
			}
		case limitOther:
			if origin == "" || c.named[origin] {
				continue
			}
			if r.ref == "" {
				ks = acquire(r.st.others, origin, now)
			}
		default:
			ks = r.st.shared
		}
		d := r.st.def
		if r.ref != "" {
			if !c.relatePasses(r, now) {
				if d.dryRun {
					v.DryRun++
					continue
				}
				t.block(now, &v, 0)
				return v
			}
			continue
		}
		if r.cluster {
			if float64(n) > d.clusterHolds {
				// More tokens than the window in Redis ever holds: no retry
				// passes, as with a local rule (keyState.peek), so the
				// block names no moment.
				ks.unpin() // an other-rule origin's state, taken above
				if d.dryRun {
					v.DryRun++
					continue
				}
				t.block(now, &v, -1)
				return v
			}
			key := ""
			if r.limit != limitDefault {
				key = origin
			}
			ok, retry, left, reset, stamp, err := c.acquireFlow(r.cfg, key, n, sink != nil && !d.dryRun)
			if err == nil && ok && stamp != 0 {
				t.holdCluster(r.cfg, key, stamp) // given back should the call not go
			}
			windowed := r.cfg.ClusterConfig.Fallback() && (d.behavior == bReject || d.behavior == bWarmUp)
			switch {
			case err == nil && ok && windowed && now >= ks.alone.Load():
				// The local window counts what the cluster let through too,
				// so that should Redis fail the local fallback sees what
				// this gateway already passed this interval, rather than
				// granting a full count on top of it. A later block takes
				// it back like any pass.
				ks.win.Add(now, n)
				t.hold(ks, &outcome{at: math.MinInt64})
				c.clusterPass(r, left, reset, sink, &v)
				continue
			case err == nil && ok && windowed:
				// Redis answers again, but the local window still holds
				// passes this gateway made alone, which Redis never saw:
				// the call must also fit this gateway's share locally
				// (below), or the fleet could pass its shares plus the
				// whole count in the interval in which Redis came back. A
				// call refused there has taken its token in Redis: Redis
				// errs on the safe side for at most a window and the
				// cluster's ResumeSkew.
			case err != nil && windowed:
				// Decided alone, below. The guard lasts until this pass has
				// left the window and, past that, as long as another gateway
				// may still be deciding alone (ResumeSkewer).
				ks.alone.Store(now + d.windowNs() + c.skew)
			}
			if (err == nil && !(ok && windowed)) || !r.cfg.ClusterConfig.Fallback() {
				ks.unpin()
				if err == nil && !ok {
					if d.dryRun {
						v.DryRun++
						continue
					}
					// The window in Redis has nothing left until retry: the
					// blocking rule's quota, reported last as a local block's.
					v.Quota, v.HasQuota = c.clusterQuota(r, 0, retry), true
					if sink != nil {
						sink.Quota(v.Quota)
					}
					t.block(now, &v, int64(retry))
					return v
				}
				if err == nil {
					c.clusterPass(r, left, reset, sink, &v)
				}
				continue
			}
		}
		var o outcome
		if r.cluster && r.cfg.ClusterConfig.ThresholdType != config.ThresholdAvgLocal {
			// Redis failed, or what this gateway passed alone while it did
			// is still in the window: this gateway's share of a global count,
			// a prioritized call's reserved pass included.
			o.share = c.cluster.Gateways()
		}
		if (maxWait >= 0 || c.queued) && d.behavior == bReject {
			// Reserved below, once every other rule passed (and the
			// throttle rules said when the call goes). A dryRun rule
			// waits too: decided at now, it would count a would-be block
			// where the enforced rule waits for room.
			t.holdPending(ks, r.ord, o.share, d.dryRun)
			pend = true
			continue
		}
		ks.try(&o, now, n, d.dryRun, !v.HasQuota || sink != nil)
		if o.hasQuota && !d.dryRun && (sink != nil || !v.HasQuota) {
			limit, window := d.quota()
			q := Quota{Policy: c.resource, Kind: ReasonFlow, Rule: r.ord, Limit: limit, Window: window,
				Remaining: o.remain, Reset: time.Duration(max(o.reset, 0))}
			if sink != nil {
				sink.Quota(q)
			}
			if !v.HasQuota {
				v.Quota, v.HasQuota = q, true
			}
		}
		if !o.pass {
			if d.dryRun {
				v.DryRun++
				if d.behavior == bConcurrency {
					t.hold(ks, &o) // counted in flight: Exit releases it
				} else {
					ks.unpin() // counted nowhere, as if blocked
				}
				continue
			}
			ks.unpin()
			// The blocking rule's quota (handed to sink above), or none: a
			// concurrency rule has no quota, and an earlier rule's, which
			// passed, says nothing of when this one will (its reset would
			// be sent as Retry-After).
			v.HasQuota = o.hasQuota
			if o.hasQuota {
				limit, window := d.quota()
				v.Quota = Quota{Policy: c.resource, Kind: ReasonFlow, Rule: r.ord, Limit: limit, Window: window,
					Remaining: o.remain, Reset: time.Duration(max(o.reset, 0))}
			}
			t.block(now, &v, o.retry)
			return v
		}
		if !d.dryRun && o.wait > int64(v.Wait) {
			v.Wait = time.Duration(o.wait)
		}
		t.hold(ks, &o)
	}
	t.fwd = now + int64(v.Wait)
	switch {
	case pending:
		t.sink = sink // for Reserve
	case maxWait >= 0 || pend:
		// A plain call a throttle rule holds back is reserved as a
		// prioritized one that may not wait: at its forward moment, or
		// refused as a reject rule refuses. Waiting for room later would
		// forward it after its throttle slot, off that queue's spacing.
		maxWait = max(maxWait, 0)
		one := [1]*Token{t}
		at := present(one[:], now)
		if ok, retry := reserve(one[:], at, maxWait, &v); !ok {
			refusedQuota(one[:], at, maxWait, sink, &v)
			t.block(now, &v, retry)
			return v
		}
		t.reserveDry(now, maxWait, &v)
		if sink != nil {
			t.prioQuotas(at, sink)
		}
	}
	c.res.all.addPass(now, n)
	c.ent.addPass(now, n)
	if t.origin != nil {
		t.origin.addPass(now, n)
	}
	return v
}

// Room is when a call of n tokens from origin, which some rule refused
// retry ns from now (0: it cannot tell), would find room in every rule of
// the checker too, counting nothing: retry, or later when a rule needs
// longer. A check stops at the first rule that refuses, and a client told
// to come back when that one has room could find a later one full; SPEC
// section 4 promises that a client that waits Retry-After and retries is
// passed. A rule that needs longer hands sink (nil: none) its quota, last,
// so that the refusal's RateLimit names it. A rule that never passes the
// call (more tokens than it holds) makes it -1: there is no moment to
// tell. Left out are the rules that cannot tell: concurrency, relate,
// dryRun, and a cluster rule's window, which is in Redis.
func (c *Checker) Room(now int64, origin string, n, retry int64, sink QuotaSink) int64 {
	if retry <= 0 {
		return retry
	}
	n = max(n, 1)
	for i := range c.rules {
		r := &c.rules[i]
		d := r.st.def
		if r.ref != "" || r.cluster || d.dryRun || d.behavior == bConcurrency {
			continue
		}
		var ks *keyState
		switch r.limit {
		case limitSpecific:
			if origin == "" {
				continue
			}
			ks = r.st.byOrigin[origin]
		case limitOther:
			if origin == "" || c.named[origin] {
				continue
			}
			e, sh := r.st.others.Peek(origin) // an origin not tracked has all its room
			if e != nil {
				ks = e.V
			}
			sh.Unlock()
		default:
			ks = r.st.shared
		}
		if ks == nil {
			continue
		}
		var o outcome
		ks.peek(&o, now, n)
		if o.retry < 0 {
			return -1
		}
		if o.retry <= retry {
			continue
		}
		retry = o.retry
		if sink != nil && o.hasQuota {
			limit, window := d.quota()
			sink.Quota(Quota{Policy: c.resource, Kind: ReasonFlow, Rule: r.ord, Limit: limit, Window: window,
				Remaining: o.remain, Reset: time.Duration(o.reset)})
		}
	}
	return retry
}

// acquireFlow asks the token service for n tokens of rule for key, and
// for the stamp of a pass when it can give them back (0: it cannot).
func (c *Checker) acquireFlow(rule *config.FlowRule, key string, n int64, report bool) (ok bool, retry time.Duration, left int64, reset time.Duration, stamp int64, err error) {
	if c.giver != nil {
		return c.giver.AcquireFlowStamp(rule, key, n, report)
	}
	ok, retry, left, reset, err = c.cluster.AcquireFlow(rule, key, n, report)
	return ok, retry, left, reset, 0, err
}

// clusterQuota is the quota of clusterMode rule r as Redis counts it: left
// after the call, until reset. Redis passes whole calls, floor(count) per
// interval whatever the behaviour; an avgLocal rule's count is each
// gateway's, and Redis counts floor(count x the live gateways).
func (c *Checker) clusterQuota(r *checkRule, left int64, reset time.Duration) Quota {
	count := r.cfg.Count
	if r.cfg.ClusterConfig.ThresholdType == config.ThresholdAvgLocal {
		count *= float64(c.cluster.Gateways())
	}
	// As Redis reads it (cluster's window script): under one call an
	// interval, whole calls over a wider window.
	ns, limit := window.ClusterWholeCalls(count, r.st.def.intervalNs)
	return Quota{Policy: c.resource, Kind: ReasonFlow, Rule: r.ord, Limit: limit, Window: time.Duration(ns),
		Remaining: float64(left), Reset: reset}
}

// clusterPass reports the quota of a pass Redis decided, as a local pass
// reports its own, when Redis said what it leaves (left >= 0: it was asked
// to, for sink).
func (c *Checker) clusterPass(r *checkRule, left int64, reset time.Duration, sink QuotaSink, v *Verdict) {
	if left < 0 || r.st.def.dryRun {
		return
	}
	q := c.clusterQuota(r, left, reset)
	if sink != nil {
		sink.Quota(q)
	}
	if !v.HasQuota {
		v.Quota, v.HasQuota = q, true
	}
}

// maxReserveTries bounds a prioritized call's reservations that a
// concurrent call made void between its search and its reservation.
const maxReserveTries = 8

// Reserve reserves the pending passes of one prioritized call's tokens
// (EnterPending on each of its checkers) at the earliest moment within
// maxWait ns of the call's present (present) at which every one of their
// qps reject rules has room, and sets v as EnterPrioritized would: Wait and
// Prioritized if the moment lies ahead, the quota of the first reserved
// rule if v has none, and DryRun the dryRun reject rules that, enforced,
// would have refused the call (reserveDry; those DecideDryRun has not
// decided). Each token
// with a sink hands it the quotas of its reserved rules. Refused (ok
// false), nothing is reserved and retry is how long until such a moment (0:
// unknown); the caller cancels every token (Cancel with ReasonFlow counts
// the block).
func Reserve(now, maxWait int64, ts []*Token, v *Verdict) (ok bool, retry int64) {
	at := present(ts, now)
	if ok, retry = reserve(ts, at, max(maxWait, 0), v); !ok {
		refusedQuota(ts, at, max(maxWait, 0), nil, v)
		return false, retry
	}
	for _, t := range ts {
		t.reserveDry(now, max(maxWait, 0), v)
		if t.sink != nil {
			t.prioQuotas(at, t.sink)
			t.sink = nil
		}
	}
	return true, 0
}

// DecideDryRun decides now the dryRun rules an EnterPending token holds
// pending, as Reserve would (which then leaves them be), and returns how
// many would have refused the call: for a caller that reports each
// checker's would-be blocks with its own verdict, as a plain call's are.
// The call's other passes still wait for Reserve; should it not go,
// ending the token gives these back too.
func (t *Token) DecideDryRun(now, maxWait int64) int {
	var v Verdict
	t.reserveDry(now, max(maxWait, 0), &v)
	return v.DryRun
}

// reserveDry decides the pending dryRun rules of a call, each as it would
// decide the call enforced and alone: its pass is reserved at the earliest
// moment of span from its window's present that has room, so that its
// window holds what the enforced rule's would, and a rule with no such
// moment counts a would-be block (v.DryRun). A pass reserved ahead is no
// wait: a dryRun rule never delays the call.
func (t *Token) reserveDry(now, maxWait int64, v *Verdict) {
	one := [1]*Token{t}
	for i := 0; i < t.nheld; i++ {
		h := t.heldAt(i)
		if !h.dry {
			continue
		}
		h.dry = false // decided: reserved at h.at, or a would-be block at pendingAt
		p := h.s.win.Present(now)
		from, until := span(one[:], p, maxWait)
		if _, _, ok, _ := reserveAt(one[:], p, from, until, h); !ok {
			v.DryRun++
		}
	}
}

// Blocking is the index in ts of the first token (Reserve's, after a
// refusal) whose own pending rules have no room within maxWait: the one
// the refusal is answered for; -1 when each would have room alone, only
// not at one moment together.
func Blocking(now, maxWait int64, ts []*Token) int {
	now = present(ts, now)
	from, until := span(ts, now, max(maxWait, 0))
	for i := range ts {
		if _, ok := commonRoom(ts[i:i+1], now, from, until, nil, false); !ok {
			return i
		}
	}
	return -1
}

// present is the moment a prioritized call of the tokens is decided at:
// the latest now any of its pending windows has seen, or its own now if
// later. A burst's calls read the clock before they reach the windows, so
// a later one may find passes stamped after its own now; measured from
// that stale reading, its slot one interval after such a pass would lie
// beyond maxWait, and a call that waits no longer than maxWait would be
// refused. Its wait, and its quota's reset, are measured from present.
func present(ts []*Token, now int64) int64 {
	for _, t := range ts {
		for i := 0; i < t.nheld; i++ {
			if h := t.heldAt(i); h.prio {
				now = h.s.win.Present(now)
			}
		}
	}
	return now
}

// reserve reserves a prioritized call's pass in the windows of the pending
// reject rules of its tokens (one per checker) at the earliest moment
// within maxWait at which all of them have room. Refused, retry is how long
// until such a moment (0: unknown).
// now is the call's present (present).
func reserve(ts []*Token, now, maxWait int64, v *Verdict) (ok bool, retry int64) {
	from, until := span(ts, now, maxWait)
	latest, ahead, ok, retry := reserveAt(ts, now, from, until, nil)
	if !ok {
		return false, retry
	}
	// A pass at the throttle slot is the throttle's wait, not a
	// prioritized one.
	ahead = ahead && latest > from
	for _, t := range ts {
		if t.prioQuota(now, v, ahead, latest) {
			break
		}
	}
	return true, 0
}

// takes reports whether held state h takes part in a reservation for only:
// every prio one when only is nil, else only that one (a dryRun rule's,
// decided alone).
func (h *heldState) takes(only *heldState) bool {
	if only == nil {
		return h.prio
	}
	return h == only
}

// span is the moments at which a call of the tokens, at present now, may
// have its pending passes reserved: from its forward moment (the latest
// fwd, or now), so that a pass is counted no earlier than the call reaches
// the upstream, until maxWait after now, or that moment alone if later.
func span(ts []*Token, now, maxWait int64) (from, until int64) {
	from = now
	for _, t := range ts {
		from = max(from, t.fwd)
	}
	return from, max(from, now+maxWait)
}

// reserveAt is reserve's search and reservation, in the pending windows
// that take part for only (takes), of the earliest moment in [from, until]
// with room; now is the clock the windows are read at. latest is the
// latest stamp reserved, ahead whether any lies beyond its window's
// present.
func reserveAt(ts []*Token, now, from, until int64, only *heldState) (latest int64, ahead, ok bool, retry int64) {
	for range maxReserveTries {
		at, ok := commonRoom(ts, now, from, until, only, false)
		if !ok {
			if at, ok := commonRoom(ts, now, now, 0, only, true); ok {
				return 0, false, false, at - now
			}
			return 0, false, false, 0
		}
		latest, ahead, failed := at, false, false
	reserving:
		for _, t := range ts {
			for i := 0; i < t.nheld; i++ {
				h := t.heldAt(i)
				if !h.takes(only) {
					continue
				}
				st, later, ok := h.s.win.Reserve(now, at, t.n, h.limit())
				if !ok {
					failed = true
					break reserving
				}
				h.at, latest, ahead = st, max(latest, st), ahead || later
			}
		}
		if failed { // taken meanwhile: give back what this try reserved
			for _, t := range ts {
				for i := 0; i < t.nheld; i++ {
					if h := t.heldAt(i); h.takes(only) && h.at != pendingAt {
						h.s.win.Unreserve(now, h.at, t.n)
						h.at = pendingAt
					}
				}
			}
			from = at
			continue
		}
		return latest, ahead, true, 0
	}
	return 0, false, false, 0
}

// commonRoom is the earliest moment in [from, until] at which every pending
// reject rule's window of the tokens that takes part for only has room for
// the call. far searches from from on however far ahead (until unread): a
// refused call's retry, which may lie beyond the one interval ahead that
// EarliestRoom looks (a prioritized call refused behind others' reserved
// passes).
func commonRoom(ts []*Token, now, from, until int64, only *heldState, far bool) (int64, bool) {
	at := from
	for range 64 {
		moved := false
		for _, t := range ts {
			for i := 0; i < t.nheld; i++ {
				h := t.heldAt(i)
				if !h.takes(only) {
					continue
				}
				var a int64
				var ok bool
				if far {
					a, ok = h.s.win.NextRoom(now, at, t.n, h.limit())
				} else {
					a, ok = h.s.win.EarliestRoom(now, at, t.n, h.limit(), until)
				}
				if !ok {
					return 0, false
				}
				if a > at {
					at, moved = a, true
				}
			}
		}
		if !moved {
			return at, true
		}
	}
	return 0, false
}

// refusedQuota sets v's quota to that of the qps reject rule that refused
// a call whose passes were pending (no moment of span, from now, the
// call's present, had room), as a plain call's block sets the blocking
// rule's: the first pending rule whose window alone has no room in span,
// else (each has room, only never at one moment with the others) the
// first with none at its start. Remaining is what its window has left,
// Reset the time until its own room comes. The quota goes to sink (nil:
// the refusing token's, from EnterPending) last, as a plain block's does,
// so that the refusal carries the RateLimit fields of the rule that
// refused it.
func refusedQuota(ts []*Token, now, maxWait int64, sink QuotaSink, v *Verdict) {
	var bt *Token
	var bh *heldState
	from, until := span(ts, now, maxWait)
	for pass := 0; pass < 2 && bh == nil; pass++ {
		if pass == 1 {
			until = from
		}
	find:
		for _, t := range ts {
			for i := 0; i < t.nheld; i++ {
				h := t.heldAt(i)
				if !h.prio {
					continue
				}
				if _, ok := h.s.win.EarliestRoom(now, from, t.n, h.limit(), until); !ok {
					bt, bh = t, h
					break find
				}
			}
		}
	}
	if bh == nil {
		return
	}
	limit, window := bh.s.def.quota()
	reset := int64(0)
	if at, ok := bh.s.win.NextRoom(now, now, bt.n, bh.limit()); ok {
		reset = max(at-now, 0)
	}
	v.Quota, v.HasQuota = Quota{Policy: bt.c.resource, Kind: ReasonFlow, Rule: bh.ord, Limit: limit, Window: window,
		Remaining: max(bh.limit()-float64(bh.s.win.Total(now)), 0), Reset: time.Duration(reset)}, true
	if sink == nil {
		sink = bt.sink
	}
	if sink != nil {
		sink.Quota(v.Quota)
	}
}

// prioQuota sets the verdict of a prioritized call whose passes are
// stamped at latest at the latest: its wait, if a pass lies ahead of the
// present (ahead), and the quota of its first reject rule. A call whose
// clock reading is older than another call's already counted is stamped
// at that present, a little after its own now: it passes at once, as a
// plain call would, and is no prioritized wait.
// It reports whether v has a quota after.
func (t *Token) prioQuota(now int64, v *Verdict, ahead bool, latest int64) bool {
	if ahead {
		v.Prioritized = true
		v.Wait = max(v.Wait, time.Duration(latest-now))
	}
	if v.HasQuota {
		return true
	}
	for i := 0; i < t.nheld; i++ {
		if h := t.heldAt(i); h.prio {
			v.HasQuota, v.Quota = true, t.prioQuotaOf(h, now, max(latest-now, 0))
			return true
		}
	}
	return false
}

// prioQuotas hands sink the quota of each reject rule whose pass a
// prioritized call reserved, as the window stands now (its reserved pass
// counted).
func (t *Token) prioQuotas(now int64, sink QuotaSink) {
	wait := int64(0) // until the call goes: its latest reserved pass
	for i := 0; i < t.nheld; i++ {
		if h := t.heldAt(i); h.prio {
			wait = max(wait, h.at-now)
		}
	}
	for i := 0; i < t.nheld; i++ {
		if h := t.heldAt(i); h.prio {
			sink.Quota(t.prioQuotaOf(h, now, wait))
		}
	}
}

// prioQuotaOf is the quota of reject rule h for a prioritized call read at
// now, its pass reserved, that goes wait later, as a plain pass's reads:
// Reset runs from the call's going until the window's oldest pass leaves,
// or, when the next call of its size would not fit then, until it would
// (the passes reserved ahead of it counted, which the oldest pass leaving
// says nothing of). Measured from now, a waiting call's answer would tell
// the client a moment already past.
func (t *Token) prioQuotaOf(h *heldState, now, wait int64) Quota {
	limit, win := h.s.def.quota()
	var r window.Result
	h.s.win.Peek(now, t.n, h.limit(), &r)
	reset := r.Reset
	if r.Retry > 0 {
		reset = max(reset, r.Retry)
	}
	return Quota{Policy: t.c.resource, Kind: ReasonFlow, Rule: h.ord, Limit: limit, Window: win,
		Remaining: max(h.limit()-float64(r.Total), 0), Reset: time.Duration(max(reset-wait, 0))}
}

// relatePasses checks a relate rule: it blocks while the related resource's
// pass count over the last second (scaled to the rule's interval) or its
// concurrency reaches count.
func (c *Checker) relatePasses(r *checkRule, now int64) bool {
	d := r.st.def
	if d.behavior == bConcurrency {
		return float64(r.refNode.conc.Load()) < d.count
	}
	return float64(r.refNode.passes(now))*float64(d.intervalNs)/1e9 < d.count
}

// block rolls back what t counted, counts the block, fills in the verdict
// and leaves t the zero Token (a blocked call holds nothing).
func (t *Token) block(now int64, v *Verdict, retry int64) {
	t.undoHeld(now)
	c := t.c
	c.res.all.addBlock(now, t.n)
	c.ent.addBlock(now, t.n)
	if t.origin != nil {
		t.origin.addBlock(now, t.n)
		t.origin.unpin()
	}
	v.Blocked = true
	v.Reason = ReasonFlow
	v.Wait = 0
	v.RetryAfter = time.Duration(retry)
	*t = Token{}
}

func (t *Token) undoHeld(now int64) {
	if t.ncl > 0 {
		t.giveBack()
	}
	for i := t.nheld - 1; i >= 0; i-- {
		h := t.heldAt(i)
		h.s.undo(now, t.enter, h.at, h.span, t.n)
		h.s.unpin()
	}
}

// Block counts a call blocked by an earlier guard (system) as a block on this
// checker's nodes.
func (c *Checker) Block(now int64, origin string, n int64) {
	if n < 1 {
		n = 1
	}
	c.res.all.addBlock(now, n)
	c.ent.addBlock(now, n)
	if origin != "" {
		o := acquire(c.res.origins, origin, now)
		o.addBlock(now, n)
		o.unpin()
	}
}

// Exit ends a passed call whose response finished (failed: upstream 5xx,
// transport error or timeout): it releases in-flight counts and records
// success or error and the response time now - enter.
func (t *Token) Exit(now int64, failed bool) {
	c := t.c
	if c == nil {
		return
	}
	for i := 0; i < t.nheld; i++ {
		h := t.heldAt(i)
		h.s.release(t.n)
		h.s.unpin()
	}
	rt := now - t.enter
	c.res.all.complete(now, t.n, rt, failed)
	c.ent.complete(now, t.n, rt, failed)
	if t.origin != nil {
		t.origin.complete(now, t.n, rt, failed)
		t.origin.unpin()
	}
	t.c = nil
}

// Cancel ends a passed call that was stopped before forwarding: by a later
// guard (reason param, degrade, …: counted as a block) or by the client
// leaving (ReasonNone: counted as nothing). Its qps counts are rolled back
// where the window still holds them, its in-flight counts released and its
// slot in every throttle queue it joined given back (see keyState.undo).
func (t *Token) Cancel(now int64, reason Reason) {
	c := t.c
	if c == nil {
		return
	}
	t.undoHeld(now)
	c.res.all.undoPass(t.enter, t.n)
	c.ent.undoPass(t.enter, t.n)
	if t.origin != nil {
		t.origin.undoPass(t.enter, t.n)
	}
	if reason != ReasonNone {
		c.res.all.addBlock(now, t.n)
		c.ent.addBlock(now, t.n)
		if t.origin != nil {
			t.origin.addBlock(now, t.n)
		}
	}
	if t.origin != nil {
		t.origin.unpin()
	}
	t.c = nil
}
