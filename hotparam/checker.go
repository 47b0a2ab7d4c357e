package hotparam

import (
	"math"
	"strings"
	"time"

	"sluice/config"
	"sluice/internal/lru"
	"sluice/limiter"
	"sluice/limiter/window"
)

// Values gives a request's values for a rule's key. A source may occur more
// than once in a request (?id=101&id=102): a rule checks each of its
// values, and the call passes only if every one does, so that a value
// cannot hide behind an empty or decoy one.
type Values interface {
	// Values returns the distinct non-empty values of k in the request
	// (for a composite key, its sources' values joined by
	// config.AppendJoined, one value per combination); none: the request
	// lacks it (or one of a composite key's sources) and the rule does
	// not apply. The slice
	// and its strings may alias a buffer the caller reuses: they are read
	// before the next call, and hotparam copies (or, past 64 bytes,
	// digests) a value before keeping it. ok is false when the request
	// cannot be checked on src (the caller's limit on values was passed):
	// Enter then stops, gives back what it took and blocks the call with
	// ReasonNone, and the caller answers it as it sees fit; a dryRun rule
	// counts it in Verdict.DryRun instead.
	Values(k config.Key) (vals []string, ok bool)
}

// Checker checks the param rules of one resource, in file order. A nil
// *Checker (a resource without param rules) passes every call. It is safe for
// concurrent use; its per-value state may be shared with the Checkers of
// later snapshots (rules unchanged by a reload).
type Checker struct {
	rules   []*rule
	cluster TokenService  // decides clusterMode rules; nil: they apply locally
	giver   TokenReturner // cluster, if it can give tokens back; else nil
	headers []string      // the response headers the rules' countOn read, each once
	// failures: a rule counts failures (countOn failure), so a call's
	// tokens depend on whether its request reached the upstream
	failures bool
}

// Headers are the response headers (canonical names) whose figures the
// checker's rules take after the answer (countOn responseHeader:NAME):
// the caller hands them to Token.Answer and keeps them from the client.
// The caller must not modify the slice.
func (c *Checker) Headers() []string {
	if c == nil {
		return nil
	}
	return c.headers
}

// CountsFailures reports that a rule of the checker counts failed answers
// (countOn failure): the caller tells Token.Exit whether a call whose
// client left had reached the upstream (Unheard), which costs it a
// request trace the other calls need not pay for.
func (c *Checker) CountsFailures() bool { return c != nil && c.failures }

// Enter checks every rule of the checker against each of the call's values
// for the rule's key that the rule's match selects, at now, for n tokens (n < 1 counts as 1;
// concurrency rules count the call once per value, whatever n). Looking
// up a value already tracked does not allocate, nor does a call with one
// value per rule and at most three rules.
//
// If the call passes, the returned Token must be ended exactly once with Exit
// or Cancel; Verdict.Wait > 0 when a throttle rule queued the call (the caller
// waits that long before forwarding, or Cancels if the client goes away). If
// a rule blocks one of the values, the verdict has Blocked, Reason
// limiter.ReasonParam and, when known, RetryAfter; what was taken for the
// call (earlier rules, earlier values) is given back and the Token is zero.
// A dryRun rule that would block is counted in Verdict.DryRun (once per
// value) and the call goes on; dryRun rules never delay a call.
// Verdict.Quota describes the qps-reject rule and value with the fewest
// tokens left.
func (c *Checker) Enter(now int64, v Values, n int64) (t Token, vd limiter.Verdict) {
	vd = c.EnterQuotas(&t, now, v, n, nil)
	return t, vd
}

// EnterQuotas is Enter that also hands sink (nil: none) the Quota of every
// qps-reject rule and value that counts the call, the blocking one
// included, with the value as its Key (limiter.QuotaSink). It writes the
// Token to *t, whatever *t held: a caller that keeps the Token inside a
// larger value (the gateway's pooled exchange) saves copying it.
func (c *Checker) EnterQuotas(t *Token, now int64, v Values, n int64, sink limiter.QuotaSink) limiter.Verdict {
	var vd limiter.Verdict
	if c == nil {
		*t = Token{}
		return vd
	}
	if n < 1 {
		n = 1
	}
	*t = Token{ts: c.cluster, giver: c.giver}
	for i, r := range c.rules {
		vals, ok := v.Values(r.key)
		if !ok {
			if r.dryRun {
				vd.DryRun++ // a dryRun rule never changes what passes
				continue
			}
			t.Cancel(now)
			*t = Token{}
			return limiter.Verdict{Blocked: true, DryRun: vd.DryRun}
		}
		for _, val := range vals {
			// A value the rule's match leaves out passes it untouched,
			// tracked nowhere.
			if !r.match.Match(val) {
				continue
			}
			if r.enterValue(c.cluster, c.giver, now, val, n, t, &vd, quotaTo{sink, i}) {
				t.Cancel(now)
				*t = Token{}
				return vd
			}
		}
	}
	return vd
}

// enterValue checks one value of the call against r, adding what it takes
// to t and its wait, quota or dry-run block to vd. It reports whether the
// call is blocked; vd is then the block's verdict.
func (r *rule) enterValue(ts TokenService, gb TokenReturner, now int64, val string, n int64, t *Token, vd *limiter.Verdict, qt quotaTo) (blocked bool) {
	share := 0
	var period outcome // a calendar quota's fallback: the period's end and length
	if r.cluster && ts != nil {
		var decided bool
		var o outcome
		if decided, share, o = r.enterCluster(ts, gb, now, val, n, qt.sink != nil && !r.dryRun); decided {
			switch {
			case o.took:
				// After the answer, the cluster is charged for this value:
				// the caller's buffer is gone by then.
				t.add(slot{r: r, n: r.held(n), acquire: n, cost: -1, val: strings.Clone(val)})
			case o.stamp != 0 && !o.blocked:
				// Given back should the call not go.
				t.add(slot{r: r, n: r.held(n), acquire: n, cost: -1, val: o.kept, back: o.stamp, count: o.asked})
			}
			return r.verdict(&o, vd, val, qt)
		}
		period = o
	}
	// Entered with the value's shard locked, so that enters of one
	// value are serialised (the CAS loops only race Exit and Cancel)
	// and the value cannot be evicted between lookup and enter.
	e, sh := r.table.Get(val, now)
	var o outcome
	if e == nil {
		// Every tracked value is in flight or queued: the rule cannot
		// track one more without passing its cap, so it fails closed.
		o = outcome{blocked: true}
	} else {
		r.turnPeriod(&e.V, now, period.reset, period.period)
		o = r.enter(&e.V, now, n, share)
		if period.reset > 0 {
			// A calendar quota's fallback, as Redis answers: t (and a
			// block's Retry-After) count down to the reset, w is the
			// period's length.
			o.reset, o.period = period.reset, period.period
			if o.blocked {
				if o.retry != neverPasses {
					o.retry = period.reset
				}
			} else {
				e.V.alone.Store(e.V.alone.Load() | madeAlone)
			}
		}
		e.V.count(now, o.blocked)
	}
	sh.Unlock()
	if o.took {
		t.add(slot{r: r, e: e, undo: o.undo, sched: o.sched, n: r.held(n), acquire: n, cost: -1, share: share, ord: qt.ord})
	}
	return r.verdict(&o, vd, val, qt)
}

// quotaTo is where a value's quota goes besides the verdict: sink (nil:
// nowhere), as the ord-th param rule of its resource (Quota.Rule).
type quotaTo struct {
	sink limiter.QuotaSink
	ord  int
}

// enterCluster asks the cluster about one value of a clusterMode rule.
// decided: the cluster passed (o.stamp != 0: Cancel can give its tokens
// back, see TokenReturner) or refused the call (o.blocked). Else Redis
// failed: share is what the local fallback divides the count by (1 for
// avgLocal), or the value passes when the rule does not fall back. With
// report, a pass of a rolling window asks Redis what it leaves, for the
// RateLimit fields (o then has the value's quota).
func (r *rule) enterCluster(ts TokenService, gb TokenReturner, now int64, val string, n int64, report bool) (decided bool, share int, o outcome) {
	// The value's count (an item's?) is in its table entry; the lock is
	// not held across the round trip to Redis.
	e, sh := r.table.Get(val, now)
	if e == nil {
		sh.Unlock()
		return true, 0, outcome{blocked: true}
	}
	p := &r.params[e.V.param]
	if p.never {
		e.V.count(now, true)
		sh.Unlock()
		return true, 0, outcome{blocked: true, p: p, retry: neverPasses}
	}
	sh.Unlock()
	share = r.share(ts)
	n = r.held(n)
	if float64(n) > r.clusterHolds(p) {
		// More than the value's window (or period) in Redis ever holds:
		// no retry passes, as with a local bucket (enterBucket), so the
		// block names no moment. (An avgLocal window grows with the fleet.)
		r.count(val, now, true)
		return true, 0, outcome{blocked: true, p: p, retry: neverPasses}
	}
	var qr QuotaReturner
	if r.calendar {
		// A pass of the period is stamped, so that a call not forwarded
		// (a later rule blocked it, its client left while queued) gives
		// it back: "count per calendar day" counts the calls served. An
		// after-answer rule's place is held in flight the same way.
		qr, _ = ts.(QuotaReturner)
	}
	if r.after && (r.calendar && qr == nil || !r.calendar && gb == nil) {
		// With nothing to give a pass back with: let in while the window
		// (or the period) has room for the check; the answer's charge
		// (Token.Exit) is what counts. An after-answer call otherwise
		// takes its pass (of the rolling window, or the calendar period)
		// below, held while it is in flight (Token.Exit settles it): let
		// in on a look, any number of guesses, or of costly calls, sent at
		// once across the fleet would reach the upstream before the first
		// answer counted.
		var ok bool
		var retry time.Duration
		var err error
		var q outcome
		if r.calendar {
			var left int64
			var reset, period time.Duration
			ok, left, reset, period, err = ts.CheckQuota(r.cfg, p.count, val, r.checkOf(n))
			q = outcome{p: p, remaining: float64(left), reset: int64(reset), period: int64(period)}
			if !ok {
				q.retry, q.remaining = q.reset, 0 // out until the period's reset
			}
		} else {
			var left int64
			var reset time.Duration
			ok, retry, left, reset, err = ts.PeekParamLeft(r.cfg, p.count, val, r.checkOf(n), report)
			switch {
			case !ok:
				q = r.windowBlocked(ts, p, retry)
			case left >= 0:
				q = r.windowQuota(ts, p, left, reset)
			}
		}
		switch {
		case err == nil && ok && r.calendar && r.spentAlone(val, now, q.reset, q.period):
			// As below for a pass the period took: the check knows
			// nothing of what this gateway charged alone.
			return false, share, periodOf(r, &q)
		case err == nil:
			r.count(val, now, !ok)
			// A dryRun rule's refused call goes on uncharged (enterAfter).
			q.blocked, q.took = !ok, ok
			return true, 0, q
		case !r.cfg.ClusterConfig.Fallback():
			r.count(val, now, false)
			return true, 0, outcome{took: true}
		}
		return false, share, periodOf(r, &q)
	}
	var ok bool
	var retry time.Duration // a window's block: until it can take the call
	var err error
	var q outcome // a calendar quota's figures, for the RateLimit fields
	if r.calendar {
		var left, stamp int64
		var reset, period time.Duration
		if qr != nil {
			ok, left, reset, period, stamp, err = qr.AcquireQuotaStamp(r.cfg, p.count, val, n)
		} else {
			ok, left, reset, period, err = ts.AcquireQuota(r.cfg, p.count, val, n)
		}
		q = outcome{p: p, remaining: float64(left), reset: int64(reset), period: int64(period)}
		if ok && err == nil && stamp != 0 {
			q.stamp, q.asked = stamp, p.count
		}
	} else {
		var left int64
		var reset time.Duration
		var stamp int64
		if gb != nil {
			ok, retry, left, reset, stamp, err = gb.AcquireParamStamp(r.cfg, p.count, val, n, report)
		} else {
			ok, retry, left, reset, err = ts.AcquireParamLeft(r.cfg, p.count, val, n, report)
		}
		if ok && left >= 0 {
			q = r.windowQuota(ts, p, left, reset)
		}
		if ok && err == nil && stamp != 0 {
			q.stamp, q.asked = stamp, p.count
		}
	}
	switch {
	case err == nil && ok:
		if r.calendar && r.spentAlone(val, now, q.reset, q.period) {
			// This period's bucket holds passes this gateway made while
			// Redis failed, which Redis never counted: until the reset the
			// call must also fit this gateway's share locally (the caller
			// decides it), or a short outage would add a share to the
			// period's count. The call has taken its place in Redis: Redis
			// errs on the safe side.
			return false, share, periodOf(r, &q)
		}
		if e, sh = r.table.Get(val, now); e != nil {
			if r.calendar {
				r.turnPeriod(&e.V, now, q.reset, q.period)
			} else if now < e.V.alone.Load() {
				// Redis answers again, but the bucket still holds passes
				// this gateway made alone, which Redis never saw: the call
				// must also fit this gateway's share locally (the caller
				// decides it), or the fleet could pass its shares plus the
				// whole count in the window in which Redis came back. A
				// call refused there has taken its tokens in Redis: Redis
				// errs on the safe side for at most one window.
				sh.Unlock()
				return false, share, outcome{}
			}
			r.chargeBucket(&e.V, &r.params[e.V.param], now, n, share)
			e.V.count(now, false)
		}
		if q.stamp != 0 {
			q.kept = keptValue(e, val)
		}
		sh.Unlock()
		return true, 0, q
	case err == nil && r.calendar:
		// Blocked until the period's reset: t and Retry-After say so.
		r.count(val, now, true)
		q.blocked, q.retry, q.remaining = true, q.reset, 0
		return true, 0, q
	case err == nil:
		r.count(val, now, true)
		q = r.windowBlocked(ts, p, retry)
		q.blocked = true
		return true, 0, q
	case !r.cfg.ClusterConfig.Fallback():
		r.count(val, now, false)
		return true, 0, outcome{}
	}
	if !r.calendar {
		// Decided alone (by the caller): Redis will not know of it.
		if e, sh = r.table.Get(val, now); e != nil {
			e.V.alone.Store(now + int64(r.window))
		}
		sh.Unlock()
	}
	return false, share, periodOf(r, &q)
}

// periodOf is what a fallback keeps of a calendar quota's answer that
// failed: when the period ends and its length (the service reads them from
// its clock, Redis or not), so that the local bucket counts the period's
// calls and is full again at the reset. Nothing for other rules.
func periodOf(r *rule, q *outcome) outcome {
	if !r.calendar {
		return outcome{}
	}
	return outcome{reset: q.reset, period: q.period}
}

// A calendar quota's value keeps in alone the end of the period its local
// bucket counts (ns, the low bit cleared), and in the low bit whether the
// bucket holds passes made while Redis failed (madeAlone), which Redis
// never counted. One nanosecond of a period's end is worth the word.
const madeAlone = 1

// turnPeriod starts a calendar quota's local bucket afresh once a new
// period has begun, reset being the time until the current one ends (0:
// not known) and period its length. The bucket's end is on the monotonic
// clock, the reset on the wall clock the service reads periods from: after
// the wall clock stepped forward, the period ended (its Retry-After told a
// client to come back then) before the bucket did, and a client that came
// back was refused again and told to wait a day. A reset that ends over
// half a period after the bucket is a new period's. The caller holds v's
// shard lock.
func (r *rule) turnPeriod(v *value, now, reset, period int64) {
	if reset <= 0 {
		return
	}
	if end := v.alone.Load() &^ madeAlone; end == 0 || now >= end || period > 0 && now+reset > end+period/2 {
		v.state.Store(idle)
		v.alone.Store((now + reset) &^ madeAlone)
	}
}

// spentAlone reports that val's calendar bucket holds passes this gateway
// made alone while Redis failed, in the period that ends reset from now.
func (r *rule) spentAlone(val string, now, reset, period int64) bool {
	e, sh := r.table.Get(val, now)
	defer sh.Unlock()
	if e == nil {
		return false
	}
	r.turnPeriod(&e.V, now, reset, period)
	return e.V.alone.Load()&madeAlone != 0
}

// periodEnd is when the period v's calendar bucket counts ends (0: none
// seen yet).
func periodEnd(v *value) int64 { return v.alone.Load() &^ madeAlone }

// periodOver reports that the period v's calendar bucket counts has ended:
// it is full again at the value's next call (turnPeriod).
func (r *rule) periodOver(v *value, now int64) bool {
	end := periodEnd(v)
	return end != 0 && now >= end
}

// keptValue is val as its table entry e keeps it, which outlives the
// caller's buffer at no cost; a long value (kept as its digest) or one the
// table could not keep (e nil) is copied.
func keptValue(e *lru.Entry[value], val string) string {
	if e != nil {
		if k, ok := e.Key(); ok {
			return k
		}
	}
	return strings.Clone(val)
}

// windowQuota is the quota of a value's window in Redis as Redis gave it:
// left after the call, until reset. Its limit is Redis's, whole calls:
// floor(count), and for an avgLocal rule (whose count is each gateway's)
// floor(count x the live gateways).
func (r *rule) windowQuota(ts TokenService, p *param, left int64, reset time.Duration) outcome {
	count := p.count
	if r.cfg.ClusterConfig.ThresholdType == config.ThresholdAvgLocal {
		count *= float64(ts.Gateways())
	}
	// As Redis reads it (cluster's window script): under one call an
	// interval, whole calls over a wider window.
	ns, limit := window.ClusterWholeCalls(count, int64(r.window))
	o := outcome{p: p, remaining: float64(left), reset: int64(reset), limit: limit}
	if ns != int64(r.window) {
		o.period = ns
	}
	return o
}

// clusterHolds is the most tokens p's window (or calendar period) in Redis
// holds, as its script counts them: floor(count) whole calls (under one, one
// call over a wider window); +Inf for an avgLocal rule, whose window grows
// with the live gateways.
func (r *rule) clusterHolds(p *param) float64 {
	switch {
	case r.cfg.ClusterConfig.ThresholdType == config.ThresholdAvgLocal:
		return math.Inf(1)
	case r.calendar:
		return math.Floor(p.count)
	}
	_, limit := window.ClusterWholeCalls(p.count, int64(r.window))
	return limit
}

// windowBlocked is a value's quota when its window in Redis refused the
// call: nothing left until retry, when the window frees.
func (r *rule) windowBlocked(ts TokenService, p *param, retry time.Duration) outcome {
	q := r.windowQuota(ts, p, 0, retry)
	q.retry = int64(retry)
	return q
}

// share is what a local bucket divides the count by while Redis fails: the
// live gateways for a global rule, 1 for avgLocal.
func (r *rule) share(ts TokenService) int {
	if r.cfg.ClusterConfig.ThresholdType == config.ThresholdAvgLocal {
		return 1
	}
	return ts.Gateways()
}

// localShare is what r's local buckets divide the count by now (1: the
// whole count): a clusterMode rule's fallback's share, under ts.
func (r *rule) localShare(ts TokenService) int {
	if r.cluster && ts != nil {
		return r.share(ts)
	}
	return 1
}

// verdict adds one value's outcome o to vd and reports whether the call is
// blocked; vd is then the block's verdict.
func (r *rule) verdict(o *outcome, vd *limiter.Verdict, val string, qt quotaTo) (blocked bool) {
	if o.blocked {
		if r.dryRun {
			vd.DryRun++
			return false
		}
		*vd = limiter.Verdict{
			Blocked:    true,
			Reason:     limiter.ReasonParam,
			RetryAfter: time.Duration(max(o.retry, 0)),
			DryRun:     vd.DryRun,
		}
		if o.p != nil && o.retry != neverPasses {
			vd.Quota, vd.HasQuota = r.quota(o, qt.ord), true
			if qt.sink != nil {
				q := vd.Quota
				q.Key = val
				qt.sink.Quota(q)
			}
		}
		return true
	}
	if r.dryRun {
		return false
	}
	if w := time.Duration(o.wait); w > vd.Wait {
		vd.Wait = w
	}
	if o.p != nil && qt.sink != nil {
		q := r.quota(o, qt.ord)
		q.Key = val
		qt.sink.Quota(q)
	}
	if o.p != nil && (!vd.HasQuota || o.remaining < vd.Quota.Remaining) {
		vd.Quota, vd.HasQuota = r.quota(o, qt.ord), true
	}
	return false
}

// count counts one call of val at now in its table entry, for a decision
// made without the entry's lock (by the cluster).
func (r *rule) count(val string, now int64, blocked bool) {
	e, sh := r.table.Get(val, now)
	if e != nil {
		e.V.count(now, blocked)
	}
	sh.Unlock()
}
