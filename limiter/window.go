package limiter

import "sync/atomic"

// windowBuckets is how many buckets one interval of a rule's sliding window is
// cut into; statIntervalMs is whole ms, so an interval is exactly windowBuckets
// widths. A bucket leaves the window only once a full interval has passed
// since its end, so the window is the current bucket and the windowBuckets
// before it (ringSize buckets). Then every pass that a real interval holds was
// still counted when the last of them was checked, so no real interval ever
// passes more than count, at any overload and from any start (Sentinel's two
// buckets let up to 2x through; dropping a bucket one interval after its start
// lets up to count plus the passes made late in the oldest bucket through:
// 1.2x at 20x overload, 2x at 100x). The price: under a steady overload count
// passes per ringSize buckets, i.e. 50/51 of count per interval.
// See TestRejectNoRealIntervalAboveCount.
const (
	windowBuckets = 50
	ringSize      = windowBuckets + 1
)

// window is an exact sliding-window counter: a ring of buckets, each one atomic
// word holding the bucket's epoch (low 32 bits of now/width) and its count, so a
// bucket is reset and counted in a single CAS and no count is lost or carried
// into the wrong bucket. total mirrors the sum of the ring's counts: every CAS
// that changes a bucket by d is followed by total.Add(d), and buckets that leave
// the window are swept out of it once per bucket width, so a check costs a few
// atomics instead of a scan. A sweep or rollback not yet applied to total only
// makes it larger, so concurrent checks err on the side of blocking.
// It is lock-free and safe for concurrent use; concurrent callers' now are
// assumed to be close (within a bucket width).
//
// Epochs are kept modulo 2^32 (see newer): a bucket left untouched for just
// under a multiple of 2^32 bucket widths (at most maxAhead less; that is an
// idle rule of about a day at the finest width, 2.7 years at 1 s intervals)
// looks current or newer, so it may be counted once more or keep its slot
// from counting for up to maxAhead buckets; that is accepted.
type window struct {
	width int64                   // bucket width, ns
	inv   float64                 // 1/width: epoch by a multiply, corrected to exact
	ring  [ringSize]atomic.Uint64 // epoch<<32 | count
	total atomic.Int64            // sum of the ring's counts
	swept atomic.Int64            // latest epoch whose expired buckets were swept
	// coarse counts passes per whole interval (two slots, same packing): the
	// warm-up behaviours sync their tokens from the previous interval's passes.
	coarse []atomic.Uint64
}

func newWindow(intervalNs int64, coarse bool) *window {
	w := &window{width: max(intervalNs/windowBuckets, 1)}
	w.inv = 1 / float64(w.width)
	w.swept.Store(-1 << 62)
	if coarse {
		w.coarse = make([]atomic.Uint64, 2)
	}
	return w
}

// maxAhead is how far (in buckets, modulo 2^32) a slot's epoch may be ahead
// of a caller's and still be newer: that caller was delayed. Anything else is
// older, i.e. stale, however long ago it was written. 2^20 buckets are 21 s at
// the finest width, far beyond any real delay.
const maxAhead = 1 << 20

// newer tells whether the packed slot value old holds a newer bucket than
// epoch cur. An empty slot (count 0) is never newer: it has nothing to keep,
// and a never-touched slot (the zero word) would otherwise look newer than
// every epoch with bit 31 set (comparing as int32), so a window created then
// would count nothing, ever.
func newer(old uint64, cur uint32) bool {
	d := uint32(old>>32) - cur
	return d != 0 && d < maxAhead && uint32(old) != 0
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func mod(a, b int64) int64 {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}

// epoch is floor(now/width). A float multiply is far cheaper than an integer
// division; its result is off by at most a few epochs and corrected exactly.
func (w *window) epoch(now int64) int64 {
	e := int64(float64(now) * w.inv)
	for e*w.width > now {
		e--
	}
	for (e+1)*w.width <= now {
		e++
	}
	return e
}

func (w *window) slot(e int64) *atomic.Uint64 { return &w.ring[mod(e, ringSize)] }

// sweep takes the buckets that left the window by epoch e out of total.
func (w *window) sweep(e int64) {
	if s := w.swept.Load(); s < e {
		w.sweepFrom(s, e)
	}
}

func (w *window) sweepFrom(s, e int64) {
	if !w.swept.CompareAndSwap(s, e) {
		return
	}
	for y := max(s+1, e-ringSize+1); y <= e; y++ {
		sl, cur := w.slot(y), uint32(y)
		for {
			old := sl.Load()
			if uint32(old>>32) == cur || newer(old, cur) {
				break // current or newer: nothing expired here
			}
			if sl.CompareAndSwap(old, uint64(cur)<<32) {
				if c := int64(uint32(old)); c != 0 {
					w.total.Add(-c)
				}
				break
			}
		}
	}
}

// add counts n in the bucket of now and returns the window's total after it.
// A caller whose now is older than its slot's non-empty bucket (it was
// delayed a whole ring) adds nothing.
func (w *window) add(now, n int64) (total, e int64) {
	e = w.epoch(now)
	w.sweep(e)
	sl, cur := w.slot(e), uint32(e)
	if w.coarse != nil {
		w.coarseAdd(now, n)
	}
	for {
		old := sl.Load()
		oe := uint32(old >> 32)
		switch {
		case oe == cur:
			if sl.CompareAndSwap(old, old+uint64(n)) {
				return w.total.Add(n), e
			}
		case !newer(old, cur):
			if sl.CompareAndSwap(old, uint64(cur)<<32|uint64(uint32(n))) {
				return w.total.Add(n - int64(uint32(old))), e
			}
		default: // counted as if added, so the check still holds it to the limit
			return w.total.Load() + n, e
		}
	}
}

// sub takes back n counted by add(at, n) if that bucket is still in the ring.
func (w *window) sub(at, n int64) {
	if w.coarse != nil {
		subPacked(w.coarseSlot(at), uint32(floorDiv(at, w.width*windowBuckets)), n)
	}
	e := w.epoch(at)
	if d := subPacked(w.slot(e), uint32(e), n); d != 0 {
		w.total.Add(-d)
	}
}

// subPacked takes up to n from a packed slot if it still holds epoch cur and
// returns how much it took.
func subPacked(sl *atomic.Uint64, cur uint32, n int64) int64 {
	for {
		old := sl.Load()
		if uint32(old>>32) != cur {
			return 0
		}
		c := int64(uint32(old))
		d := min(c, n)
		if sl.CompareAndSwap(old, old-uint64(d)) {
			return d
		}
	}
}

func (w *window) coarseSlot(now int64) *atomic.Uint64 {
	return &w.coarse[mod(floorDiv(now, w.width*windowBuckets), 2)]
}

func (w *window) coarseAdd(now, n int64) {
	sl, cur := w.coarseSlot(now), uint32(floorDiv(now, w.width*windowBuckets))
	for {
		old := sl.Load()
		oe := uint32(old >> 32)
		var nw uint64
		switch {
		case oe == cur:
			nw = old + uint64(n)
		case !newer(old, cur):
			nw = uint64(cur)<<32 | uint64(uint32(n))
		default:
			return
		}
		if sl.CompareAndSwap(old, nw) {
			return
		}
	}
}

// previous returns the passes of the whole interval before the one of now.
func (w *window) previous(now int64) int64 {
	idx := floorDiv(now, w.width*windowBuckets) - 1
	v := w.coarse[mod(idx, 2)].Load()
	if uint32(v>>32) != uint32(idx) {
		return 0
	}
	return int64(uint32(v))
}

// reset returns how long after now the oldest non-empty bucket leaves the
// window (0 if the window is empty). Under steady traffic the oldest bucket
// is the first one looked at.
func (w *window) reset(now, e int64) int64 {
	x := e - ringSize + 1
	i := mod(x, ringSize)
	for ; x <= e; x++ {
		v := w.ring[i].Load()
		if uint32(v>>32) == uint32(x) && uint32(v) != 0 {
			return w.leaves(x) - now
		}
		if i++; i == ringSize {
			i = 0
		}
	}
	return 0
}

// leaves is when bucket x leaves the window: one interval after its end.
func (w *window) leaves(x int64) int64 { return (x + ringSize) * w.width }

// sum returns the window's total at now, by scanning (tests, slow paths).
func (w *window) sum(now int64) int64 {
	e := w.epoch(now)
	var total int64
	for x := e - ringSize + 1; x <= e; x++ {
		if v := w.slot(x).Load(); uint32(v>>32) == uint32(x) {
			total += int64(uint32(v))
		}
	}
	return total
}

// freeAfter returns how long after now the window's total drops to at most
// target as its oldest buckets leave it; ok is false if it never does so.
func (w *window) freeAfter(now, target int64) (d int64, ok bool) {
	if target < 0 {
		return 0, false
	}
	e := w.epoch(now)
	total := w.sum(now)
	for x := e - ringSize + 1; x <= e && total > target; x++ {
		v := w.slot(x).Load()
		if uint32(v>>32) != uint32(x) || uint32(v) == 0 {
			continue
		}
		total -= int64(uint32(v))
		if total <= target {
			return w.leaves(x) - now, true
		}
	}
	return 0, total <= target
}
