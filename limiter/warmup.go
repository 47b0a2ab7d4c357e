package limiter

import (
	"math"
	"sync"
	"sync/atomic"

	"sluice/internal/ring"
)

// warmParams are Guava's SmoothWarmingUp quantities, in tokens of the rule's
// interval (statIntervalMs; 1 s by default, as in Sentinel).
type warmParams struct {
	count, warning, maxTok, coldFactor float64
	// minRate is the least rate allowed, however cold: min(count, 1) for
	// warmUp, whose window passes whole calls, so that a cold rate under one
	// call per interval (count 2, coldFactor 3: 0.67) still passes one call
	// per interval instead of nothing, which would never spend a token and so
	// never warm up. warmUpThrottle spaces calls by any rate: 0.
	minRate float64
	// coldFloor is the integer part of the cold rate (minRate included):
	// above the warning line tokens refill only while the previous interval
	// passed fewer. With an exact window a cold limiter passes exactly
	// floor(max(count/coldFactor, minRate)); comparing against the unrounded
	// cold rate would refill forever and never warm up.
	coldFloor float64
}

// newWarmParams derives the warm-up quantities; minRate is the least rate
// allowed when cold (see warmParams).
func newWarmParams(count, periods, coldFactor, minRate float64) warmParams {
	p := warmParams{count: count, coldFactor: coldFactor, minRate: minRate}
	p.warning = periods * count / (coldFactor - 1)
	p.maxTok = p.warning + 2*periods*count/(1+coldFactor)
	p.coldFloor = math.Floor(max(count/coldFactor, minRate))
	return p
}

// rate is the allowed passes per interval with tokens stored: Sentinel's
// 1/((tokens-warning)*slope + 1/count) above the warning line, with slope =
// (coldFactor-1)/count/(maxTok-warning), written as
// count/(1 + (coldFactor-1)*(tokens-warning)/(maxTok-warning)). The two are
// equal in exact arithmetic, but Sentinel's form rounds twice through a
// reciprocal: count 723, coldFactor 3 gave 240.99999999999997 at maxTok, so
// a cold window passed 240, not 241. In this form a full bucket is exactly
// count/coldFactor, correctly rounded, so a whole cold rate stays whole.
func (p *warmParams) rate(tokens float64) float64 {
	if p.count <= 0 {
		return 0
	}
	if tokens >= p.warning && p.maxTok > p.warning {
		frac := (tokens - p.warning) / (p.maxTok - p.warning)
		return max(p.count/(1+(p.coldFactor-1)*frac), p.minRate)
	}
	return p.count
}

// warmState holds the stored tokens, synced once per interval under mu; the
// hot path reads them with two atomic loads.
//
// The sync grid is anchored at the first call after the limiter was fully
// cold (tokens at maxTok after an idle interval), not at multiples of the
// interval since the clock's origin: so the warm-up curve is the same
// wherever on the interval grid the load starts. (Synced on the clock's grid,
// a load starting late in an interval spent its first interval's tokens on a
// fraction of it: seed example 3 3 3 3 3 3 4 4 5 7 10 when starting 900 ms
// in, against 3 3 3 4 5 6 9 10 10 10 on a whole second.)
type warmState struct {
	mu     sync.Mutex    // serialises syncs
	due    atomic.Int64  // when the next sync is due, ns
	tokens atomic.Uint64 // float64 bits
	passed atomic.Int64  // tokens passed since the last sync
	callN  atomic.Int64  // the largest call (tokens) tried since the last sync
	anchor int64         // mu: start of the sync grid
	last   int64         // mu: grid index of the last sync
	synced bool          // mu: a sync has happened
}

func newWarmState(p warmParams) *warmState {
	w := &warmState{}
	w.due.Store(math.MinInt64)
	w.tokens.Store(math.Float64bits(p.maxTok))
	return w
}

// noteCall notes a call of n tokens: syncWarm judges an interval's passes
// by the size of its calls. Written only when a call is larger than any
// since the last sync, so calls of one size store once an interval.
func (w *warmState) noteCall(n int64) {
	if n > w.callN.Load() {
		w.callN.Store(n)
	}
}

// syncWarm refills and spends the stored tokens at the first call of each
// interval of the sync grid, from the previous interval's passes, and
// returns the tokens.
func (s *keyState) syncWarm(now int64) float64 {
	w, p := s.warm, &s.def.warm
	if now < w.due.Load() {
		return math.Float64frombits(w.tokens.Load())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if now < w.due.Load() {
		return math.Float64frombits(w.tokens.Load())
	}
	iv := s.def.intervalNs
	if !w.synced {
		w.synced, w.anchor, w.last = true, now, 0
		w.passed.Store(0)
		w.tokens.Store(math.Float64bits(p.maxTok))
		w.due.Store(now + iv)
		return p.maxTok
	}
	idx := ring.FloorDiv(now-w.anchor, iv)
	gap := idx - w.last
	prev := float64(w.passed.Swap(0))
	if gap > 1 {
		prev = 0 // those passes belong to an older interval
	}
	// The interval went slower than the cold rate when it had room for
	// one more of its largest call: prev + big <= the tokens a cold
	// interval passes. Calls of n tokens fill a cold window of coldFloor
	// tokens only to a multiple of n (3 calls of 2 tokens leave 1 of a
	// floor of 7); asking prev to reach coldFloor itself refilled the bucket
	// every interval, and a warmUp route with acquireCount 2 stayed at its
	// cold rate for good. A cold window holds at least one call
	// (windowLimit).
	big := float64(max(w.callN.Swap(0), 1))
	floor := p.coldFloor
	if s.def.behavior == bWarmUp {
		floor = max(floor, math.Floor(min(p.count, big)))
	}
	old := math.Float64frombits(w.tokens.Load())
	nt := old
	if old < p.warning || prev+big <= floor || gap > 1 {
		// Below the warning line (warm) tokens always refill; on or above it
		// only while the previous interval passed less than the cold rate, so
		// traffic at the cold rate or faster keeps spending them and warms the
		// limiter up. Sentinel's coolDownTokens tests oldValue > warningToken
		// here, so tokens sitting exactly on the line (where integer passes
		// often leave them) never refilled: the limiter stayed warm after any
		// idle time.
		// A whole interval with no call at all (gap > 1) refills too, as
		// Guava's storedPermits do while idle: with a cold rate under one
		// call an interval (warmUpThrottle, count 2, coldFactor 3) coldFloor
		// is 0, no interval passes fewer, and such a rule never cooled down.
		nt = old + float64(gap)*p.count
	}
	// Never past maxTok: passes cancelled after the sync that spent them
	// make prev negative, which gives their tokens back, but only up to a
	// full bucket. Above it the rate fell under count/coldFactor, and a
	// client keeping to the cold rate was refused.
	nt = min(max(min(nt, p.maxTok)-prev, 0), p.maxTok)
	if nt >= p.maxTok && gap > 1 {
		// fully cold after idle: the next load starts a new grid
		w.anchor, idx = now, 0
	}
	w.tokens.Store(math.Float64bits(nt))
	w.last = idx
	w.due.Store(w.anchor + (idx+1)*iv)
	return nt
}
