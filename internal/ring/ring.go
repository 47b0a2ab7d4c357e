// Package ring is the one sliding window of time buckets that sluice's
// statistics are kept in: the circuit breakers' windows, the system guard's
// response-time and BBR windows, the upstream targets' and retry budgets'
// counts (Ring, guarded by its owner's mutex), and the limiter's per-node
// statistics (Atomic, safe for concurrent use); and, where a window per key
// of a bounded map must cost no more than the key, the two-bucket estimate
// Coarse (hot parameters' passes and blocks per value).
//
// A ring of n buckets of width w ns covers the bucket that holds now
// (number floor(now/w)) and the n-1 before it. Time is an argument, never
// read from a clock. An instant older than the newest bucket counts in the
// newest (Ring: calls of concurrent goroutines complete slightly out of
// order) or is dropped (Atomic, when its slot already holds a newer bucket).
//
// ring is at the bottom of the house: it imports only the standard library,
// and every package may import it.
package ring

// FloorDiv is a/b rounded towards minus infinity, so that instants before
// the clock's origin land in the right bucket.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Mod is a mod n in [0, n): the slot of bucket number a in a ring of n.
func Mod(a, n int64) int64 {
	m := a % n
	if m < 0 {
		m += n
	}
	return m
}

// Bucket is what a Ring holds, through its pointer type: a bucket adds
// another into itself and takes another out of itself, so that the ring
// keeps the running sum of its window.
type Bucket[B any] interface {
	*B
	Add(B)
	Sub(B)
}

// Ring is a sliding window of buckets of type B with the running sum of the
// buckets in it. Not safe for concurrent use: its owner's mutex guards it.
// Build it with New; the zero Ring is unusable.
//
// Invariant: Sum is the sum of the buckets numbered Head()-Len()+1 .. Head(),
// and every other slot is zero.
type Ring[B any, P Bucket[B]] struct {
	width int64
	head  int64 // number (now/width) of the newest bucket
	used  bool  // head is set: a bucket was advanced to
	slots []B
	sum   B
}

// New returns an empty ring of n buckets of width ns each.
func New[B any, P Bucket[B]](n int, width int64) Ring[B, P] {
	if n < 1 || width < 1 {
		panic("ring: a ring needs at least one bucket of positive width")
	}
	return Ring[B, P]{width: width, slots: make([]B, n)}
}

// Advance slides the window to now, dropping the buckets that fell out of it,
// and returns the newest bucket. An instant older than the newest bucket
// counts as the newest bucket.
func (r *Ring[B, P]) Advance(now int64) *B {
	n := int64(len(r.slots))
	idx := FloorDiv(now, r.width)
	switch {
	case !r.used || idx-r.head >= n:
		r.Clear()
		r.head, r.used = idx, true
	case idx > r.head:
		var zero B
		for i := r.head + 1; i <= idx; i++ {
			b := &r.slots[Mod(i, n)]
			P(&r.sum).Sub(*b)
			*b = zero
		}
		r.head = idx
	}
	return &r.slots[Mod(r.head, n)]
}

// Add adds d to the bucket of now (and to the sum).
func (r *Ring[B, P]) Add(now int64, d B) {
	P(r.Advance(now)).Add(d)
	P(&r.sum).Add(d)
}

// Sum is the sum of the window as of the last Advance or Add.
func (r *Ring[B, P]) Sum() B { return r.sum }

// Total slides the window to now and returns its sum.
func (r *Ring[B, P]) Total(now int64) B {
	r.Advance(now)
	return r.sum
}

// Clear empties every bucket; the newest bucket stays where it was.
func (r *Ring[B, P]) Clear() {
	clear(r.slots)
	var zero B
	r.sum = zero
}

// Len is the number of buckets; Width is a bucket's width, ns.
func (r *Ring[B, P]) Len() int     { return len(r.slots) }
func (r *Ring[B, P]) Width() int64 { return r.width }

// Head is the number of the newest bucket (it starts at Head()*Width()).
// Meaningless before the first Advance.
func (r *Ring[B, P]) Head() int64 { return r.head }

// Slots is every bucket, in slot order (bucket number k is in slot
// Mod(k, Len())); the newest is at NewestSlot. Slots outside the window are
// zero. The caller may read them, not keep them across an Advance.
func (r *Ring[B, P]) Slots() []B { return r.slots }

// NewestSlot is the slot of the newest bucket.
func (r *Ring[B, P]) NewestSlot() int { return int(Mod(r.head, int64(len(r.slots)))) }

// Ago is the bucket k before the newest (0: the newest, bucket number
// Head()-k), for 0 <= k < Len(), as of the last Advance or Add.
func (r *Ring[B, P]) Ago(k int) B { return r.slots[Mod(r.head-int64(k), int64(len(r.slots)))] }
