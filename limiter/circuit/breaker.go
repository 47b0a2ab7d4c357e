package circuit

import (
	"sync"
	"sync/atomic"
	"time"

	"sluice/config"
)

// Internal states. HalfOpen is split in two so that one atomic word says both
// the state and whether the single probe slot is taken.
const (
	sClosed   uint32 = iota
	sOpen            // blocking until retryAt
	sHalfOpen        // half-open, probe slot free (the last probe was cancelled)
	sProbing         // half-open, the probe is in flight
)

func public(s uint32) State {
	switch s {
	case sOpen:
		return Open
	case sHalfOpen, sProbing:
		return HalfOpen
	}
	return Closed
}

// breaker is the circuit breaker of one degrade rule.
//
// Goroutine safe. Enter is lock-free (one atomic load while closed). Exit takes
// mu to record the call in the window and to decide a transition.
//
// Invariants:
//   - state moves Closed->Open and Probing->Closed/Open only under mu (on
//     Exit); Open->Probing and HalfOpen->Probing by a CAS on Enter, which is
//     how exactly one call wins the probe; Probing->HalfOpen by the probe's
//     Cancel.
//   - retryAt is written (under mu) before state is stored as Open.
//   - every transition but Probing->HalfOpen (invisible outside: both are
//     HalfOpen) is followed, mu still held, by res.changed, so the resource's
//     summary never misses one.
type breaker struct {
	resource string
	strategy config.DegradeStrategy
	maxRt    time.Duration // slowRatio: a call slower than this is slow
	thresh   float64
	minReq   int64
	retry    int64 // ns open before a probe is allowed

	state   atomic.Uint32
	retryAt atomic.Int64

	mu  sync.Mutex
	win window
	res *resource // shared by every breaker of this resource, across reloads
}

func newBreaker(r config.DegradeRule, interval int64, res *resource) *breaker {
	return &breaker{
		res:      res,
		resource: r.Resource,
		strategy: r.Strategy,
		maxRt:    time.Duration(r.MaxAllowedRtMs) * time.Millisecond,
		thresh:   r.Threshold,
		minReq:   r.MinRequestAmount,
		retry:    r.RetryTimeoutMs * 1e6,
		win:      newWindow(interval),
	}
}

// enter reports whether the call may pass, whether it is this breaker's probe,
// and, when blocked, how long the breaker stays open (0 if unknown).
func (b *breaker) enter(now int64) (pass, probe bool, left int64) {
	for {
		switch s := b.state.Load(); s {
		case sClosed:
			return true, false, 0
		case sOpen:
			at := b.retryAt.Load()
			if now < at {
				return false, false, at - now
			}
			if b.state.CompareAndSwap(sOpen, sProbing) {
				b.mu.Lock()
				b.res.changed()
				b.mu.Unlock()
				return true, true, 0
			}
		case sHalfOpen:
			if b.state.CompareAndSwap(sHalfOpen, sProbing) {
				return true, true, 0
			}
		default: // sProbing: the one probe is out; nothing else passes
			return false, false, 0
		}
		// Lost a CAS: the state moved under us; look again.
	}
}

// exit records a completed call and makes the transition it implies.
func (b *breaker) exit(now int64, rt time.Duration, failed, probe bool) {
	bad := failed
	if b.strategy == config.DegradeSlowRatio {
		bad = rt > b.maxRt
	}
	b.mu.Lock()
	b.win.Add(now, call(bad))
	switch {
	case probe && b.state.Load() == sProbing:
		// A slowRatio probe that failed fast (connection refused, 5xx) is no
		// evidence of recovery either, so any probe that was slow or failed
		// re-opens, whatever the strategy counts in its window.
		if bad || failed {
			b.retryAt.Store(now + b.retry)
			b.state.Store(sOpen)
			b.res.changed()
		} else {
			b.win.Clear()
			b.state.Store(sClosed)
			b.res.changed()
		}
	case b.state.Load() == sClosed && b.tripped():
		b.retryAt.Store(now + b.retry)
		b.state.Store(sOpen)
		b.res.changed()
	}
	b.mu.Unlock()
}

// cancelProbe gives the probe slot back: the probe was not forwarded after all.
func (b *breaker) cancelProbe() {
	b.state.CompareAndSwap(sProbing, sHalfOpen)
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
