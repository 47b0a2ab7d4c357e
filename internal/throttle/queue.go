// Package throttle is the virtual queue of throttle rules, shared by flow
// rules (throttle, warmUpThrottle) and param rules (throttle): calls pass at
// most one per spacing, each waiting for its slot up to a bound, and a call
// that will not go after all gives its slot back. A queue may store permits
// while idle (TakeStored: a flow rule's burstCount), spent at once.
//
// A queue is a tail, one atomic word holding the slot of the latest passed
// call (ns; in the past when permits are stored), and its Holes. The caller keeps both, so that hotparam can keep
// a value's queue in the state word its other rule kinds use. Times are ns
// on the caller's monotonic timeline; the package never reads the clock.
package throttle

import "sync/atomic"

// Take takes the next slot for a call at now that needs spacing ns: the
// earliest given-back slot it fits, else the one after the tail (now itself
// when the queue is idle). It fails when that slot is more than maxWait
// away; wait is then how long the call would have waited. A slot taken must
// be used (the call is forwarded at it) or given back with GiveBack.
func Take(tail *atomic.Int64, h *Holes, now, spacing, maxWait int64) (at, wait int64, ok bool) {
	return TakeStored(tail, h, now, spacing, 0, maxWait)
}

// TakeStored is Take for a queue that stores permits while idle (Guava's
// SmoothBursty): its tail may lag now by up to store ns, so a queue idle
// that long holds store/spacing slots in the past, which calls take at
// once (wait 0, at <= now) before the spacing resumes. No real interval of
// length L then holds more than (L + store)/spacing + 1 slots. store is at
// most math.MaxInt64/4; 0 stores nothing (Take).
func TakeStored(tail *atomic.Int64, h *Holes, now, spacing, store, maxWait int64) (at, wait int64, ok bool) {
	if at, ok := h.take(now, spacing, maxWait); ok {
		return at, at - now, true
	}
	for {
		last := tail.Load()
		next := max(last+spacing, now-store)
		if next <= now {
			if tail.CompareAndSwap(last, next) {
				return next, 0, true
			}
			continue
		}
		wait := next - now
		if wait > maxWait {
			return 0, wait, false
		}
		if tail.CompareAndSwap(last, next) {
			return next, wait, true
		}
	}
}

// GiveBack gives back, at now, the slot at that a call took with spacing
// span (the spacing when it was taken: a warm-up rate may have changed
// since) and will not use. If no later call queued behind it, the tail moves
// back and GiveBack reports true; else the slot becomes a hole for the next
// call that fits it (a slot already due is gone). It is GiveBackStored for a
// queue that stores nothing.
func GiveBack(tail *atomic.Int64, h *Holes, now, at, span int64) (tailMoved bool) {
	return GiveBackStored(tail, h, now, at, span, 0)
}

// GiveBackStored is GiveBack for a queue that stores permits (TakeStored,
// with the same store): a stored permit spent and given back is stored
// again, also when later calls took stored permits after it, so that
// burstCount + 1 calls still pass at once when one of them is not
// forwarded. Stored permits are interchangeable: while the whole queue is
// in the past (tail <= now: nobody waits) the tail moves back whichever of
// them comes back, as if the last one had.
//
// By span, as if the call had never taken its slot, when at >= now-store;
// by less when the permit comes back later, down to nothing once at+span <=
// now-store. As if it had never taken its slot, a take after it that found
// the queue (nearly) full would have been clamped to its now-store and kept
// only part of the permit, since the queue stores no more than store: the
// part left is at least at+span-(now-store). So the queue never holds more
// than it would have had the call never come, and no real interval of
// length L forwards more than (L + store)/spacing + 1 calls. (Moving the
// tail back by span regardless passed every permit that came back late on
// top of a queue refilled meanwhile: a burst at once, another as its calls
// were given back.)
func GiveBackStored(tail *atomic.Int64, h *Holes, now, at, span, store int64) (tailMoved bool) {
	for {
		last := tail.Load()
		back := span
		if last != at {
			if store <= 0 || at > now || last > now {
				h.add(now, at, span)
				return false
			}
			if back = min(span, at+span-(now-store)); back <= 0 {
				return false // the permit is stale: the queue stored anew
			}
		}
		if tail.CompareAndSwap(last, last-back) {
			return true
		}
	}
}
