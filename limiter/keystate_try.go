package limiter

import (
	"math"

	"sluice/internal/throttle"
	"sluice/limiter/window"
)

// outcome is one rule's decision on one call.
type outcome struct {
	pass     bool
	wait     int64 // ns to wait before forwarding (throttle)
	at       int64 // throttle: the slot this call took
	span     int64 // throttle: ns of spacing that slot stands for
	retry    int64 // blocked: ns until a retry may pass, 0 unknown
	hasQuota bool
	remain   float64
	reset    int64
	// share (set before try): a global cluster rule falling back to local
	// limiting while Redis fails is this gateway's 1/share of the count
	// (the gateways last seen live); 0 or 1: the whole count.
	share int
}

// shareOf is limit / share, never below one call (and never above limit):
// a count smaller than the gateways still lets each pass one.
func shareOf(limit float64, share int) float64 {
	if share <= 1 {
		return limit
	}
	return max(limit/float64(share), min(limit, 1))
}

// try checks one call of n tokens against s. force (a dryRun concurrency
// rule) counts a call in flight even when it would be blocked, since it
// really is in flight; the outcome still says it would be. Rate state is
// never forced: a dryRun qps rule evolves as if enforced, so its would-be
// blocks are the blocks it would make. quota asks for the Quota fields even
// when the call passes.
// o must be zero on entry; try fills it in place (the hot path copies nothing).
func (s *keyState) try(o *outcome, now, n int64, force, quota bool) {
	d := s.def
	switch d.behavior {
	case bReject, bWarmUp:
		if s.warm != nil {
			s.warm.noteCall(n)
		}
		s.tryWindow(o, now, n, s.windowLimit(now, o.share, n), quota)
	case bThrottle, bWarmUpThrottle:
		if s.warm != nil {
			s.warm.noteCall(n)
		}
		per, store := s.spacing(now, o.share)
		s.tryThrottle(o, now, n, per, store)
		if o.pass && s.warm != nil {
			s.warm.passed.Add(n) // the passes feed the next token sync
		}
	case bConcurrency:
		for {
			v := s.inflight.Load()
			if float64(v+n) > d.count {
				if force {
					s.inflight.Add(n)
				}
				return
			}
			if s.inflight.CompareAndSwap(v, v+n) {
				o.pass = true
				return
			}
		}
	}
}

// windowLimit is what a reject or warmUp rule's window may hold at now, of
// 1/share of the count (see shareOf), for calls of n tokens. A cold warmUp
// window holds at least one such call (as it holds one call of one token
// however cold, minRate), up to the count: a cold rate under n tokens
// passed nothing, spent no stored token and so never warmed up.
func (s *keyState) windowLimit(now int64, share int, n int64) float64 {
	d := s.def
	if d.behavior == bWarmUp {
		return max(shareOf(d.warm.rate(s.syncWarm(now)), share), min(shareOf(d.count, share), float64(n)))
	}
	return math.Floor(shareOf(d.winLimit, share))
}

// spacing is a throttle rule's time per token at now (+Inf: nothing passes),
// of 1/share of the count, and the spacings an idle queue stores.
func (s *keyState) spacing(now int64, share int) (per float64, store int64) {
	d := s.def
	if d.behavior == bWarmUpThrottle {
		if r := shareOf(d.warm.rate(s.syncWarm(now)), share); r > 0 {
			return float64(d.intervalNs) / r, 0
		}
		return math.Inf(1), 0
	}
	if share > 1 {
		return float64(d.intervalNs) / shareOf(d.count, share), d.storeNs
	}
	return d.perToken, d.storeNs
}

// peek is what try would find for a call of n tokens at now, counting
// nothing: o.retry > 0 when the rule would refuse it, with the quota of
// that refusal; -1 when no moment would pass it (more tokens than the rule
// ever holds, a count of 0); 0 when it would pass now, or when the rule
// cannot tell (a concurrency rule). A throttle queue's slots given back
// (holes) are not looked at: the retry it says is the latest the queue
// needs.
func (s *keyState) peek(o *outcome, now, n int64) {
	d := s.def
	switch d.behavior {
	case bReject, bWarmUp:
		limit := s.windowLimit(now, 0, n)
		var r window.Result
		s.win.Peek(now, n, limit, &r)
		if r.Retry < 0 {
			o.retry = -1
			return
		}
		if r.Retry > 0 {
			o.hasQuota, o.retry = true, r.Retry
			o.remain = max(math.Floor(limit)-float64(r.Total), 0)
			o.reset = max(r.Reset, r.Retry)
		}
	case bThrottle, bWarmUpThrottle:
		per, store := s.spacing(now, 0)
		sp := per * float64(n)
		if math.IsInf(sp, 0) || sp > math.MaxInt64/4 {
			o.retry = -1 // count 0: nothing passes
			return
		}
		next := max(s.latest.Load()+int64(math.Ceil(sp)), now-store)
		if wait := next - now; wait > d.maxQueueNs {
			o.hasQuota, o.retry, o.reset = true, wait-d.maxQueueNs, wait-d.maxQueueNs
		}
	}
}

// tryWindow passes the call if the exact window then holds at most limit.
func (s *keyState) tryWindow(o *outcome, now, n int64, limit float64, quota bool) {
	var r window.Result
	o.hasQuota = true
	if s.win.TryAdd(now, n, limit, quota, &r) {
		o.pass = true
		if s.warm != nil {
			s.warm.passed.Add(n)
		}
		if quota {
			o.remain = max(math.Floor(limit)-float64(r.Total), 0)
			o.reset = r.Reset
		}
		return
	}
	if r.Retry < 0 {
		// More tokens than the window ever holds: no time the call would
		// pass, so no RateLimit t (which promises one) and no Retry-After.
		o.hasQuota = false
		return
	}
	o.retry = r.Retry
	o.remain = max(math.Floor(limit)-float64(r.Total), 0)
	// t on a block is when this call fits (SPEC §4: a client that waits
	// that long is passed), which for a call of more tokens than the
	// oldest pass frees is later than that pass leaving.
	o.reset = max(r.Reset, r.Retry)
}

// tryThrottle takes the next slot of the rule's virtual queue
// (internal/throttle, the one param rules use), reusing a slot given back
// inside it first; store is the spacing (ns) an idle queue banks as permits
// (burstCount).
func (s *keyState) tryThrottle(o *outcome, now, n int64, perToken float64, store int64) {
	o.hasQuota = true
	o.at = math.MinInt64 // no slot taken
	sp := perToken * float64(n)
	if math.IsInf(sp, 0) || sp > math.MaxInt64/4 {
		return // count 0: nothing passes
	}
	// Rounded up, so that count calls never fit in less than statIntervalMs.
	spacing := int64(math.Ceil(sp))
	o.span = spacing
	maxQ := s.def.maxQueueNs
	at, wait, ok := throttle.TakeStored(&s.latest, &s.holes, now, spacing, store, maxQ)
	if !ok {
		o.retry = wait - maxQ
		o.reset = o.retry
		return
	}
	o.pass, o.at, o.wait = true, at, wait
	o.reset = int64(perToken)
	// A stored permit's slot is in the past: the room it leaves counts too.
	// r is what is left of the policy the client is shown (count per
	// interval), never more: the queue may take more, each call later.
	o.remain = min(throttleRemain(maxQ-(at-now), perToken), max(math.Floor(s.def.count), 1))
}

// throttleRemain is how many more one-token calls the queue still takes now.
func throttleRemain(room int64, perToken float64) float64 {
	if room < 0 || perToken <= 0 {
		return 0
	}
	return math.Floor(float64(room) / perToken)
}

// undo takes back at now what try counted for a call entered at enter. Its
// throttle slot at (standing for span ns, the spacing when it was taken: a
// warm-up rate may have changed since) moves the queue's tail back if no
// later call queued behind it, else it becomes a hole for the next call.
func (s *keyState) undo(now, enter, at, span, n int64) {
	switch s.def.behavior {
	case bReject, bWarmUp:
		switch at {
		case math.MinInt64:
			s.win.Sub(now, enter, n)
		case pendingAt: // a prioritized call's pass, not reserved
		default: // reserved at at (EnterPrioritized)
			s.win.Unreserve(now, at, n)
		}
		if s.warm != nil {
			s.warm.passed.Add(-n)
		}
	case bThrottle, bWarmUpThrottle:
		if s.warm != nil {
			s.warm.passed.Add(-n)
		}
		if at != math.MinInt64 {
			throttle.GiveBackStored(&s.latest, &s.holes, now, at, span, s.def.storeNs)
		}
	case bConcurrency:
		s.inflight.Add(-n)
	}
}

// release ends a passed call: only concurrency holds anything to the end.
func (s *keyState) release(n int64) {
	if s.def.behavior == bConcurrency {
		s.inflight.Add(-n)
	}
}
