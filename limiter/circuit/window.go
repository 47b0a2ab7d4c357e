package circuit

import ring "sluice/limiter/window"

// window is a sliding window over the last interval, split into buckets, that
// counts completed calls (total) and the bad ones among them (slow or failed,
// per strategy). The zero window is unusable; build it with newWindow.
// Not goroutine safe: the owning breaker's mutex guards it.
//
// Invariant: total and bad are the sums of the buckets numbered
// head-len(buckets)+1 .. head; every other bucket slot is zero.
type window struct {
	width   int64 // bucket width, ns
	head    int64 // number (now/width) of the newest bucket
	buckets []bucket
	total   int64
	bad     int64
}

type bucket struct{ total, bad int64 }

// windowBuckets is how many buckets a window has: enough that the window slides
// smoothly (a tenth of the interval at a time), few enough to clear cheaply.
const windowBuckets = 10

func newWindow(intervalMs int64) *window {
	n := int64(windowBuckets)
	if intervalMs < n {
		n = intervalMs
	}
	return &window{
		width:   intervalMs * 1e6 / n,
		buckets: make([]bucket, n),
		head:    minInt64,
	}
}

const minInt64 = -1 << 63

// advance moves the window to now, dropping buckets that fell out of it. An
// instant older than the newest bucket counts as the newest bucket: calls of
// concurrent goroutines may complete slightly out of order.
func (w *window) advance(now int64) *bucket {
	n := int64(len(w.buckets))
	idx := ring.FloorDiv(now, w.width)
	if idx > w.head {
		if w.head == minInt64 || idx-w.head >= n {
			w.clear()
		} else {
			for i := w.head + 1; i <= idx; i++ {
				b := &w.buckets[ring.Mod(i, n)]
				w.total -= b.total
				w.bad -= b.bad
				*b = bucket{}
			}
		}
		w.head = idx
	}
	return &w.buckets[ring.Mod(w.head, n)]
}

// add records one completed call at now.
func (w *window) add(now int64, bad bool) {
	b := w.advance(now)
	b.total++
	w.total++
	if bad {
		b.bad++
		w.bad++
	}
}

// clear empties the window (the breaker closed after a good probe).
func (w *window) clear() {
	clear(w.buckets)
	w.total, w.bad = 0, 0
}
