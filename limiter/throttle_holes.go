package limiter

import (
	"sync"
	"sync/atomic"
)

// maxHoles bounds the slots one throttle queue remembers as given up; past it
// a new hole is forgotten, which only wastes that slot.
const maxHoles = 1024

// holes are throttle-queue slots given up by calls that left (client gone, or
// blocked by a later rule) while later calls were queued behind them, so the
// queue's tail could not simply move back. A new call takes the earliest hole
// it fits instead of joining the tail. Without this, clients less patient than
// maxQueueingTimeMs would fill the queue with empty slots and, under a steady
// overload, nothing would be forwarded at all: every call would be handed a
// slot further away than its client waits.
//
// The zero holes is empty and ready. n is read without mu on the hot path,
// so a queue that never had a hole costs one atomic load.
type holes struct {
	n    atomic.Int32 // len(at)
	mu   sync.Mutex   // guards at and span
	at   []int64      // slot instants (ns), ascending
	span []int64      // ns of spacing each slot stood for
}

// add remembers the slot at (standing for span ns of spacing) given up at
// now; a slot already due is gone and is not kept.
func (h *holes) add(now, at, span int64) {
	if at <= now {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropBefore(now)
	if len(h.at) >= maxHoles {
		if at >= h.at[len(h.at)-1] {
			return
		}
		h.at, h.span = h.at[:len(h.at)-1], h.span[:len(h.span)-1]
	}
	i := len(h.at)
	for i > 0 && h.at[i-1] > at {
		i--
	}
	h.at = append(h.at, 0)
	h.span = append(h.span, 0)
	copy(h.at[i+1:], h.at[i:])
	copy(h.span[i+1:], h.span[i:])
	h.at[i], h.span[i] = at, span
	h.n.Store(int32(len(h.at)))
}

// take removes and returns the earliest hole at or after now that stands for
// at least span ns and is at most maxWait away.
func (h *holes) take(now, span, maxWait int64) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropBefore(now)
	for i, at := range h.at {
		if at-now > maxWait {
			break
		}
		if h.span[i] >= span {
			h.at = append(h.at[:i], h.at[i+1:]...)
			h.span = append(h.span[:i], h.span[i+1:]...)
			h.n.Store(int32(len(h.at)))
			return at, true
		}
	}
	return 0, false
}

// dropBefore forgets the holes whose instant has passed unused. mu is held.
func (h *holes) dropBefore(now int64) {
	k := 0
	for k < len(h.at) && h.at[k] < now {
		k++
	}
	if k > 0 {
		h.at = append(h.at[:0], h.at[k:]...)
		h.span = append(h.span[:0], h.span[k:]...)
		h.n.Store(int32(len(h.at)))
	}
}
