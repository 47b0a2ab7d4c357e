package hotparam

import (
	"sluice/internal/lru"
	"sluice/internal/throttle"
	"sluice/limiter"
)

// inlineSlots is how many rules' holdings a Token keeps without allocating;
// a resource rarely has more param rules than this.
const inlineSlots = 3

// slot is what one rule of a passed call holds.
type slot struct {
	r     *rule
	e     *entry // nil: a clusterMode value the cluster let in (val)
	undo  int64
	sched int64
	// An after-answer rule's (rule.after): n is what the call holds since
	// it entered (rule.held: a failure rule's acquireCount, a figure's one
	// token), acquire the call's acquireCount, cost the answer's figure
	// (-1: none read), share the local bucket's share of the count, val the
	// value, copied, whose cluster window is charged ("": the local bucket
	// is).
	n       int64
	acquire int64
	cost    int64
	share   int
	val     string
	// A clusterMode value the cluster passed (e nil, val its value):
	// back is the stamp Cancel gives its n tokens back with (0: none),
	// count what the cluster was asked with.
	back  int64
	count float64
	ord   int // the rule's place among its resource's param rules (Quota.Rule)
}

// Token is what a passed call holds until it ends: per-value concurrency and
// what Cancel can give back. The zero Token holds nothing; Exit and Cancel on
// it do nothing. A Token is owned by one call: end it exactly once, with Exit
// or Cancel, from one goroutine; later calls are no-ops.
type Token struct {
	inline [inlineSlots]slot
	n      int
	more   []slot
	ended  bool
	ts     TokenService  // the Checker's, for after-answer clusterMode rules
	giver  TokenReturner // the Checker's, for passes given back (slot.back)
}

// Answer is the upstream's answer to a forwarded call, as far as countOn
// rules read it.
type Answer interface {
	// Header returns the values of the response header name (canonical
	// form). They are as the upstream sent them: hostile until parsed.
	Header(name string) []string
}

func (t *Token) add(s slot) {
	if t.n < inlineSlots {
		t.inline[t.n] = s
	} else {
		t.more = append(t.more, s)
	}
	t.n++
}

func (t *Token) each(f func(s *slot)) {
	for i := 0; i < t.n && i < inlineSlots; i++ {
		f(&t.inline[i])
	}
	for i := range t.more {
		f(&t.more[i])
	}
}

// Answer reads the figures of the answer's headers that the call's
// countOn responseHeader:NAME rules take (see ParseCost), before the
// answer reaches the client; Exit takes them. Call it once, when the
// upstream's status and headers are in; a call never answered (no
// Answer) costs acquireCount on such rules.
func (t *Token) Answer(a Answer) {
	if t == nil || t.ended {
		return
	}
	for i := 0; i < t.n; i++ {
		s := t.slot(i)
		if s.r.after && s.r.header != "" {
			if v, ok := ParseCost(a.Header(s.r.header)); ok {
				s.cost = v
			}
		}
	}
}

// Spent hands sink the quota that each value of the call's countOn
// responseHeader rules leaves once Exit takes the figure Answer read: the
// RateLimit fields of a pass were written as the call entered, holding one
// token, so a figure of 10 against 10 left showed r=9, and the client's
// next call was refused. Only what the figure takes beyond the token held
// lowers a quota, and only in a local bucket (a clusterMode value's window
// is in Redis). Nothing is charged here; the quota is computed as Exit
// will leave the bucket at now (Exit comes after the body, and the bucket
// refills meanwhile, so r may be one lower than the value will have). The
// quotas have no Key: a rule's quota is known by its Rule.
func (t *Token) Spent(now int64, sink limiter.QuotaSink) {
	if t == nil || t.ended || sink == nil {
		return
	}
	for i := 0; i < t.n; i++ {
		s := t.slot(i)
		if !s.r.after || s.r.header == "" || s.r.dryRun || s.e == nil || s.undo <= 0 || s.cost <= s.n {
			continue
		}
		p := &s.r.params[s.e.V.param]
		if p.never {
			continue
		}
		cost, tau, count, emission := bucketOf(p, s.cost-s.n, s.share)
		o := bucketLeft(p, inDebt(s.e.V.state.Load(), now, cost, tau), now, tau, count, emission)
		// No Key: the value's quota is known by its rule (Rule) alone.
		sink.Quota(s.r.quota(&o, s.ord))
	}
}

// slot is the i-th slot (i < t.n).
func (t *Token) slot(i int) *slot {
	if i < inlineSlots {
		return &t.inline[i]
	}
	return &t.more[i-inlineSlots]
}

// Unheard is the status of a forwarded call whose client left before any
// answer once its request had reached the upstream, which judged it, but
// nobody heard the verdict. A countOn failure rule keeps its tokens for
// it: given back, a client could hang up on every guess of a login and be
// charged none (30 guesses in 3.4 s against 2 a minute, over h2 streams it
// reset). The caller tells it from a client that left while the request
// was still being connected (0: nothing was sent, nothing is kept).
const Unheard = -1

// Exit ends a call that was forwarded and answered status (0: no answer
// came; Unheard: its client left before one): it releases per-value
// concurrency, and after-answer rules settle their tokens now (countOn
// failure: the acquireCount held since the call entered, in the local
// bucket or the cluster's rolling window or calendar period, is kept if
// status is one of failureStatuses or Unheard, else given back; a period
// that was only looked at (a TokenService that is no QuotaReturner) is
// charged it then; responseHeader: the figure Answer read, else
// acquireCount). Rate tokens taken as the call entered stay spent.
func (t *Token) Exit(now int64, status int) {
	if t == nil || t.ended {
		return
	}
	t.ended = true
	for i := 0; i < t.n; i++ {
		s := t.slot(i)
		switch {
		case s.r.kind == kindInFlight:
			s.leave()
		case s.r.after:
			s.charge(t.ts, t.giver, now, status)
		}
	}
}

// charge takes what an after-answer rule's call costs, answered status.
func (s *slot) charge(ts TokenService, gb TokenReturner, now int64, status int) {
	r := s.r
	n := s.n
	failure := r.failures.Has(status) || status == Unheard
	if r.header != "" {
		// A figure, or acquireCount when the answer told none; the token
		// held since the call entered is part of it, and given back for
		// a figure of 0.
		n = s.acquire
		if s.cost >= 0 {
			n = s.cost
		}
		if s.undo > 0 || s.back != 0 {
			if n == 0 {
				s.releaseHold(ts, gb, now)
				return
			}
			n -= s.n
		}
		if n <= 0 {
			return
		}
		s.chargeAfter(ts, now, n)
		return
	}
	if s.undo > 0 || s.back != 0 {
		// A countOn failure call's tokens, held since it entered, in the
		// local bucket (enterAfter) or as a pass of the cluster's window
		// (enterCluster): kept for a failure.
		if !failure {
			s.releaseHold(ts, gb, now)
		}
		return
	}
	if !failure || n <= 0 {
		return // not a failure: free
	}
	s.chargeAfter(ts, now, n)
}

// releaseHold gives back what an after-answer call held since it entered.
func (s *slot) releaseHold(ts TokenService, gb TokenReturner, now int64) {
	if s.back != 0 {
		s.returnPass(ts, gb, now)
	} else {
		s.giveBack(now)
	}
}

// chargeAfter takes n more tokens for an after-answer call: from its
// value's window or period in the cluster, else from the local bucket,
// into debt if need be.
func (s *slot) chargeAfter(ts TokenService, now, n int64) {
	r := s.r
	e, share := s.e, s.share
	if s.val != "" && ts != nil {
		p := &r.params[0]
		var sh *lru.Shard[value]
		e, sh = r.table.Get(s.val, now)
		if e != nil {
			p = &r.params[e.V.param]
		}
		sh.Unlock()
		if e == nil || p.never {
			return
		}
		share = r.share(ts)
		if r.chargeCluster(ts, p, s.val, n, s.back) == nil {
			// As a pass the cluster decided: the local bucket learns
			// what this gateway spent, without debt, for a fallback.
			r.chargeBucket(&e.V, p, now, n, share)
			return
		}
		// Redis failed: the debt is kept locally, as the fallback's.
	}
	if e != nil {
		r.chargeDebt(&e.V, &r.params[e.V.param], now, n, share)
	}
}

// chargeCluster charges n to val's window in the cluster, or to its period
// for a calendar quota: the one stamp names, for a call that held a pass
// of it (0: none, the period now).
func (r *rule) chargeCluster(ts TokenService, p *param, val string, n, stamp int64) error {
	if r.calendar {
		if sc, ok := ts.(StampedCharger); ok && stamp != 0 {
			return sc.ChargeQuotaStamp(r.cfg, p.count, val, n, stamp)
		}
		return ts.ChargeQuota(r.cfg, p.count, val, n)
	}
	return ts.ChargeParam(r.cfg, p.count, val, n)
}

// leave ends one call in flight of the slot's value. If it was the last and
// an eviction scan found the value busy, the table hears of it: the value may
// now be evicted (see shard.stuck).
func (s *slot) leave() {
	if s.e.V.state.Add(-1) == 0 {
		s.r.table.Released(s.e)
	}
}

// Cancel ends a call that was not forwarded (a later guard blocked it, or the
// client left while it was queued): it releases per-value concurrency, puts
// the call's tokens back in each value's bucket (never above full), and gives
// its slot in each value's virtual queue back: the tail moves back if it was
// the last one, else the next call takes the slot.
func (t *Token) Cancel(now int64) {
	if t == nil || t.ended {
		return
	}
	t.ended = true
	t.each(func(s *slot) { s.release(t.ts, t.giver, now) })
}

func (s *slot) release(ts TokenService, gb TokenReturner, now int64) {
	if s.back != 0 { // only a giver stamps a pass
		if s.r.after || s.r.calendar {
			s.returnPass(ts, gb, now)
		} else {
			gb.GiveBackParam(s.r.cfg, s.count, s.val, s.n, s.back)
		}
		return
	}
	if s.r.after {
		if s.undo > 0 {
			s.giveBack(now) // a countOn failure call's held tokens
		}
		return // else it took nothing yet
	}
	switch s.r.kind {
	case kindInFlight:
		s.leave()
	case kindQueue:
		// Leaving the end of the queue may make the value evictable; a slot
		// inside it becomes a hole the next call takes.
		if throttle.GiveBack(&s.e.V.state, &s.e.V.holes, now, s.sched, s.undo) {
			s.r.table.Released(s.e)
		}
	case kindBucket:
		s.giveBack(now)
	}
}

// returnPass gives back a countOn failure call's pass of the cluster's
// window (or calendar period), and takes it to Redis now: a window's
// give-back goes with the gateway's next call on the value, and until then
// the fleet would count a success as a failure. One more round trip, for
// an answer that was no failure.
// The local bucket, charged the pass for a fallback, gets it back too, or
// a Redis outage would find successes counted as failures there.
func (s *slot) returnPass(ts TokenService, gb TokenReturner, now int64) {
	switch qr, ok := ts.(QuotaReturner); {
	case s.r.calendar && ok:
		qr.GiveBackQuota(s.r.cfg, s.count, s.val, s.n, s.back) // at once
	case !s.r.calendar:
		gb.GiveBackParam(s.r.cfg, s.count, s.val, s.n, s.back)
		if ts != nil {
			_, _, _, _, _ = ts.PeekParamLeft(s.r.cfg, s.count, s.val, 1, false)
		}
	}
	if ts == nil {
		return
	}
	e, sh := s.r.table.Get(s.val, now)
	if e != nil {
		cost, _, _, _ := bucketOf(&s.r.params[e.V.param], s.n, s.r.share(ts))
		e.V.refund(cost, now)
	}
	sh.Unlock()
}

// giveBack puts a bucket call's tokens (undo) back, never above full.
func (s *slot) giveBack(now int64) { s.e.V.refund(s.undo, now) }

// refund puts cost (ns of a token bucket's schedule) back in v's bucket,
// never above full.
func (v *value) refund(cost, now int64) {
	for {
		tat := v.state.Load()
		if tat <= now {
			return // already full
		}
		if v.state.CompareAndSwap(tat, max(tat-cost, now)) {
			return
		}
	}
}
