package hotparam

import "sluice/internal/throttle"

// inlineSlots is how many rules' holdings a Token keeps without allocating;
// a resource rarely has more param rules than this.
const inlineSlots = 3

// slot is what one rule of a passed call holds.
type slot struct {
	r     *rule
	e     *entry
	undo  int64
	sched int64
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

// Exit ends a call that was forwarded: it releases per-value concurrency. Rate
// tokens stay spent.
func (t *Token) Exit(now int64) {
	if t == nil || t.ended {
		return
	}
	t.ended = true
	t.each(func(s *slot) {
		if s.r.kind == kindInFlight {
			s.leave()
		}
	})
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
	t.each(func(s *slot) { s.release(now) })
}

func (s *slot) release(now int64) {
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
		for {
			tat := s.e.V.state.Load()
			if tat <= now {
				return // already full
			}
			back := max(tat-s.undo, now)
			if s.e.V.state.CompareAndSwap(tat, back) {
				return
			}
		}
	}
}
