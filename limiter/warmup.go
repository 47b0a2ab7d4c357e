package limiter

import (
	"math"
	"sync"
	"sync/atomic"
)

// warmParams are Guava's SmoothWarmingUp quantities, in tokens of the rule's
// interval (statIntervalMs; 1 s by default, as in Sentinel).
type warmParams struct {
	count, warning, maxTok, slope float64
	// coldFloor is the integer part of the cold rate: above the warning line
	// tokens refill only while the previous interval passed fewer. With an exact
	// window a cold limiter passes exactly floor(count/coldFactor); comparing
	// against the unrounded cold rate would refill forever and never warm up.
	coldFloor float64
}

func newWarmParams(count, periods, coldFactor float64) warmParams {
	p := warmParams{count: count}
	p.warning = periods * count / (coldFactor - 1)
	p.maxTok = p.warning + 2*periods*count/(1+coldFactor)
	if p.maxTok > p.warning && count > 0 {
		p.slope = (coldFactor - 1) / count / (p.maxTok - p.warning)
	}
	p.coldFloor = math.Floor(count / coldFactor)
	return p
}

// rate is the allowed passes per interval with tokens stored.
func (p *warmParams) rate(tokens float64) float64 {
	if p.count <= 0 {
		return 0
	}
	if tokens >= p.warning {
		above := tokens - p.warning
		return math.Nextafter(1/(above*p.slope+1/p.count), math.Inf(1))
	}
	return p.count
}

// warmState holds the stored tokens, synced once per interval under mu; the
// hot path reads them with one atomic load.
type warmState struct {
	mu     sync.Mutex    // serialises syncs
	last   atomic.Int64  // interval index of the last sync
	tokens atomic.Uint64 // float64 bits
}

func newWarmState(p warmParams) *warmState {
	w := &warmState{}
	w.last.Store(math.MinInt64)
	w.tokens.Store(math.Float64bits(p.maxTok))
	return w
}

// syncWarm refills and spends the stored tokens at the first call of each
// interval, from the previous interval's passes, and returns the tokens.
func (s *keyState) syncWarm(now int64) float64 {
	w, p := s.warm, &s.def.warm
	idx := floorDiv(now, s.def.intervalNs)
	if w.last.Load() >= idx {
		return math.Float64frombits(w.tokens.Load())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	last := w.last.Load()
	old := math.Float64frombits(w.tokens.Load())
	if last >= idx {
		return old
	}
	prev := float64(s.win.previous(now))
	nt := old
	if last == math.MinInt64 {
		nt = p.maxTok
	} else if old < p.warning || (old > p.warning && prev < p.coldFloor) {
		nt = old + float64(idx-last)*p.count
	}
	nt = max(min(nt, p.maxTok)-prev, 0)
	w.tokens.Store(math.Float64bits(nt))
	w.last.Store(idx)
	return nt
}
