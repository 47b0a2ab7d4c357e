package circuit

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"sluice/config"
)

// Internal states, one atomic word so that a closed breaker costs one load.
const (
	sClosed   uint32 = iota
	sOpen            // blocking until retryAt
	sHalfOpen        // letting probeNum probes through, deciding on their outcomes
)

func public(s uint32) State {
	switch s {
	case sOpen:
		return Open
	case sHalfOpen:
		return HalfOpen
	}
	return Closed
}

// breaker is the circuit breaker of one degrade rule.
//
// Goroutine safe. Enter is lock-free while closed (one atomic load) and
// while open before retryAt; deciding a probe and Exit take mu.
//
// Invariants:
//   - state changes only under mu, and every change is followed, mu still
//     held, by res.changed, so the resource's summary never misses one.
//   - retryAt is written (under mu) before state is stored as Open.
//   - half-open (mu): issued probes were let through in this half-open
//     spell (read without mu to refuse calls once all are out), good of
//     them succeeded, good <= issued <= probeNum; out counts the
//     probes in flight, of this spell or of one that a failure ended.
//     A new spell starts only when out is 0, so every probe that finishes
//     while half-open is one of the current spell's.
type breaker struct {
	resource string
	strategy config.DegradeStrategy
	maxRt    time.Duration // slowRatio: a call slower than this is slow
	thresh   float64
	minReq   int64
	retry    int64 // ns open before a probe is allowed
	probeNum int64
	errors   config.StatusSet // answers that count as errors

	state   atomic.Uint32
	retryAt atomic.Int64

	mu     sync.Mutex
	issued atomic.Int64 // half-open: probes let through in this spell (written under mu)
	good   int64        // half-open: of them, succeeded
	out    int64        // probes in flight
	// closedAt (mu): when the probes last closed the breaker. A call that
	// started before (now - rt < closedAt) and is no probe was forwarded
	// before the breaker opened: its outcome, often a timeout of the
	// trouble that opened it, says nothing of the recovered upstream and
	// is not counted (it re-opened a breaker the probes had just closed).
	closedAt int64
	win      window
	res      *resource // shared by every breaker of this resource, across reloads
}

func newBreaker(r config.DegradeRule, res *resource) *breaker {
	return &breaker{
		res:      res,
		resource: r.Resource,
		strategy: r.Strategy,
		maxRt:    time.Duration(r.MaxAllowedRtMs) * time.Millisecond,
		thresh:   r.Threshold,
		minReq:   r.MinRequestAmount,
		retry:    r.RetryTimeoutMs * 1e6,
		probeNum: r.ProbeNum,
		errors:   newStatusSet(r.ErrorStatuses),
		win:      newWindow(r.StatIntervalMs),
		closedAt: math.MinInt64,
	}
}

// enter reports whether the call may pass, whether it is one of this
// breaker's probes, and, when blocked, how long the breaker stays open (0
// if unknown: a probe decides).
func (b *breaker) enter(now int64) (pass, probe bool, left int64) {
	switch b.state.Load() {
	case sClosed:
		return true, false, 0
	case sOpen:
		if at := b.retryAt.Load(); now < at {
			return false, false, at - now
		}
	case sHalfOpen:
		if b.issued.Load() >= b.probeNum {
			return false, false, 0 // the probes are out; their outcomes decide
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case sClosed: // closed meanwhile
		return true, false, 0
	case sOpen:
		if at := b.retryAt.Load(); now < at {
			return false, false, at - now
		}
		if b.out > 0 {
			// Probes of the spell a failure ended are still out; the next
			// spell waits for them, so that their outcomes are not taken
			// for its own.
			return false, false, 0
		}
		b.issued.Store(0)
		b.good = 0
		b.state.Store(sHalfOpen)
		b.res.changed()
	}
	if b.issued.Load() >= b.probeNum {
		return false, false, 0
	}
	b.issued.Add(1)
	b.out++
	return true, true, 0
}

// exit records a completed call (status: see Token.Exit) and makes the
// transition it implies.
func (b *breaker) exit(now int64, rt time.Duration, status int, probe bool) {
	failed := b.errors.Has(status)
	bad := failed
	if b.strategy == config.DegradeSlowRatio {
		bad = rt > b.maxRt
	}
	b.mu.Lock()
	if !probe && now-int64(rt) < b.closedAt {
		b.mu.Unlock()
		return // forwarded before the breaker opened (closedAt)
	}
	b.win.Add(now, call(bad))
	if probe {
		b.out--
	}
	switch st := b.state.Load(); {
	case probe && st == sHalfOpen:
		// A slowRatio probe that failed fast (connection refused, an
		// error status) is no evidence of recovery either, so any probe
		// that was slow or failed re-opens, whatever the strategy counts
		// in its window.
		if bad || failed {
			b.open(now)
			break
		}
		if b.good++; b.good == b.probeNum {
			b.win.Clear()
			b.closedAt = now
			b.state.Store(sClosed)
			b.res.changed()
		}
	case st == sClosed && b.tripped():
		b.open(now)
	}
	b.mu.Unlock()
}

// open opens the breaker for retryTimeoutMs from now (mu held).
func (b *breaker) open(now int64) {
	b.retryAt.Store(now + b.retry)
	b.state.Store(sOpen)
	b.res.changed()
}

// cancelProbe gives a probe back: it was not forwarded after all, or its
// outcome is unknown. In the same half-open spell its slot is free again.
func (b *breaker) cancelProbe() {
	b.mu.Lock()
	b.out--
	if b.state.Load() == sHalfOpen {
		b.issued.Add(-1)
	}
	b.mu.Unlock()
}

// tripped applies Sentinel's trip conditions to the window (mu held):
//   - nothing trips while total < minRequestAmount;
//   - errorCount: errors > threshold (threshold 5 trips on the 6th error);
//   - slowRatio, errorRatio: ratio > threshold, and also ratio == 1 when
//     threshold == 1 (else a threshold of 1 could never trip). Java Sentinel
//     applies the "== 1" rule to slowRatio only; we apply it to errorRatio too
//     so that the two ratios read alike.
func (b *breaker) tripped() bool {
	w := b.win.Sum()
	if w.total < b.minReq || w.total == 0 {
		return false
	}
	if b.strategy == config.DegradeErrorCount {
		return float64(w.bad) > b.thresh
	}
	ratio := float64(w.bad) / float64(w.total)
	return ratio > b.thresh || (b.thresh >= 1 && w.bad == w.total)
}

// newStatusSet is the set of the statuses config validated; status 0 (no
// answer: a transport failure) is always in it.
func newStatusSet(list []string) config.StatusSet {
	s := config.NewStatusSet(list)
	s.Add(0)
	return s
}
