package throttle

import (
	"sync"
	"sync/atomic"
)

// maxHoles bounds the slots one queue remembers as given back; past it a new
// hole is forgotten, which only wastes that slot.
const maxHoles = 1024

// Holes are the slots of one queue given back by calls that left (client
// gone, or blocked by a later rule) while later calls were queued behind
// them, so that the queue's tail could not simply move back. A new call
// takes the earliest hole it fits instead of joining the tail. Without this,
// clients less patient than the queue's bound would fill it with empty slots
// and, under a steady overload, nothing would be forwarded at all: every
// call would be handed a slot further away than its client waits.
//
// The zero Holes is empty and ready, and costs one word: the list is
// allocated when the first hole is given back, so a queue that never had one
// (most: hotparam keeps a queue per tracked value) costs one atomic load per
// call.
type Holes struct{ p atomic.Pointer[holeList] }

type holeList struct {
	n    atomic.Int32 // len(at), read without mu on the hot path
	mu   sync.Mutex   // guards at and span
	at   []int64      // slot instants (ns), ascending
	span []int64      // ns of spacing each slot stood for
}

// add remembers the slot at (standing for span ns of spacing) given back at
// now; a slot already due is gone and is not kept.
func (h *Holes) add(now, at, span int64) {
	if at <= now {
		return
	}
	l := h.p.Load()
	if l == nil {
		h.p.CompareAndSwap(nil, &holeList{})
		l = h.p.Load()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropBefore(now)
	if len(l.at) >= maxHoles {
		if at >= l.at[len(l.at)-1] {
			return
		}
		l.at, l.span = l.at[:len(l.at)-1], l.span[:len(l.span)-1]
	}
	i := len(l.at)
	for i > 0 && l.at[i-1] > at {
		i--
	}
	l.at = append(l.at, 0)
	l.span = append(l.span, 0)
	copy(l.at[i+1:], l.at[i:])
	copy(l.span[i+1:], l.span[i:])
	l.at[i], l.span[i] = at, span
	l.n.Store(int32(len(l.at)))
}

// take removes and returns the earliest hole at or after now that stands for
// at least span ns and is at most maxWait away.
func (h *Holes) take(now, span, maxWait int64) (int64, bool) {
	l := h.p.Load()
	if l == nil || l.n.Load() == 0 {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropBefore(now)
	for i, at := range l.at {
		if at-now > maxWait {
			break
		}
		if l.span[i] >= span {
			l.at = append(l.at[:i], l.at[i+1:]...)
			l.span = append(l.span[:i], l.span[i+1:]...)
			l.n.Store(int32(len(l.at)))
			return at, true
		}
	}
	return 0, false
}

// dropBefore forgets the holes whose instant has passed unused. mu is held.
func (l *holeList) dropBefore(now int64) {
	k := 0
	for k < len(l.at) && l.at[k] < now {
		k++
	}
	if k > 0 {
		l.at = append(l.at[:0], l.at[k:]...)
		l.span = append(l.span[:0], l.span[k:]...)
		l.n.Store(int32(len(l.at)))
	}
}
