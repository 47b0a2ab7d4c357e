package circuit

import "sluice/internal/ring"

// window is a sliding window over the last interval, split into buckets, that
// counts completed calls (total) and the bad ones among them (slow or failed,
// per strategy). Not goroutine safe: the owning breaker's mutex guards it.
type window = ring.Ring[bucket, *bucket]

type bucket struct{ total, bad int64 }

func (b *bucket) Add(o bucket) { b.total += o.total; b.bad += o.bad }
func (b *bucket) Sub(o bucket) { b.total -= o.total; b.bad -= o.bad }

// windowBuckets is how many buckets a window has: enough that the window slides
// smoothly (a tenth of the interval at a time), few enough to clear cheaply.
const windowBuckets = 10

func newWindow(intervalMs int64) window {
	n := int64(windowBuckets)
	if intervalMs < n {
		n = intervalMs
	}
	return ring.New[bucket](int(n), intervalMs*1e6/n)
}

// call is one completed call at the window's bucket, bad or not.
func call(bad bool) bucket {
	if bad {
		return bucket{total: 1, bad: 1}
	}
	return bucket{total: 1}
}
