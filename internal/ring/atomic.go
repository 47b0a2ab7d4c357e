package ring

import (
	"math"
	"sync"
	"sync/atomic"
)

// Resetter is what an Atomic holds, through its pointer type: a bucket of
// atomic counters that Reset zeroes.
type Resetter[B any] interface {
	*B
	Reset()
}

// Atomic is a sliding window of buckets of type B (atomic counters) that
// many goroutines add to at once. Each slot remembers the number of the
// bucket it holds; moving a slot to a newer bucket is serialised by a mutex,
// but adds racing that reset may be lost: its counts are statistics, not
// limits. The owner keeps the slots (an array of its own, so that a ring
// costs no allocation of its own) and hands them to Init; an Atomic is not
// copied after Init.
type Atomic[B any, P Resetter[B]] struct {
	width int64
	mu    sync.Mutex // serialises slot resets
	slots []Slot[B]
}

// Slot is one bucket of an Atomic, with the number of the bucket it holds.
type Slot[B any] struct {
	num atomic.Int64
	b   B
}

// Init makes a an empty ring over slots (at least one), buckets of width ns.
func (a *Atomic[B, P]) Init(width int64, slots []Slot[B]) {
	if len(slots) < 1 || width < 1 {
		panic("ring: a ring needs at least one bucket of positive width")
	}
	a.width, a.slots = width, slots
	for i := range slots {
		P(&slots[i].b).Reset()
		slots[i].num.Store(math.MinInt64)
	}
}

// Num is the number of the bucket that holds now.
func (a *Atomic[B, P]) Num(now int64) int64 { return FloorDiv(now, a.width) }

// At returns the bucket of now, reset if its slot held an older bucket, or
// nil if the slot already holds a newer one (now is older than the ring).
func (a *Atomic[B, P]) At(now int64) *B {
	k := FloorDiv(now, a.width)
	s := &a.slots[Mod(k, int64(len(a.slots)))]
	if s.num.Load() == k {
		return &s.b
	}
	return a.rotate(s, k)
}

func (a *Atomic[B, P]) rotate(s *Slot[B], k int64) *B {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := s.num.Load()
	if old > k {
		return nil
	}
	if old < k {
		P(&s.b).Reset()
		s.num.Store(k) // last: writers that see k find the bucket zeroed
	}
	return &s.b
}

// Still returns the bucket of the instant at if its slot still holds it,
// else nil (to take back a count made at that instant).
func (a *Atomic[B, P]) Still(at int64) *B {
	k := FloorDiv(at, a.width)
	s := &a.slots[Mod(k, int64(len(a.slots)))]
	if s.num.Load() != k {
		return nil
	}
	return &s.b
}

// Len is the number of buckets.
func (a *Atomic[B, P]) Len() int { return len(a.slots) }

// Live returns slot i's bucket if it lies in the window whose newest bucket
// is number k (Num(now)), else nil. A window's sum:
//
//	k := a.Num(now)
//	for i := range a.Len() { if b := a.Live(k, i); b != nil { ... } }
func (a *Atomic[B, P]) Live(k int64, i int) *B {
	s := &a.slots[i]
	if d := k - s.num.Load(); d >= 0 && d < int64(len(a.slots)) {
		return &s.b
	}
	return nil
}
