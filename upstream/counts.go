package upstream

import "sluice/limiter/window"

// Counters a window keeps.
const (
	cRequests = iota // attempts sent (a target) or client requests (the budget)
	cErrors          // attempts that failed
	cRetries         // retries
	nCounters
)

// windowBuckets is how many buckets a window has: it covers the current
// bucket and the windowBuckets-1 before it.
const windowBuckets = 10

// counts is a sliding window of windowBuckets buckets of width ns, each
// holding nCounters counts. Not safe for concurrent use: its owner's mutex
// guards it. Invariant: sum is the sum of the buckets head-9 .. head, and
// every other slot is zero.
type counts struct {
	width int64
	head  int64 // number (now/width) of the newest bucket
	b     [windowBuckets][nCounters]int64
	sum   [nCounters]int64
	used  bool
}

// advance moves the window to now. An instant older than the newest bucket
// counts in the newest: concurrent calls finish slightly out of order.
func (c *counts) advance(now int64) *[nCounters]int64 {
	idx := window.FloorDiv(now, c.width)
	switch {
	case !c.used || idx-c.head >= windowBuckets:
		c.b, c.sum, c.head, c.used = [windowBuckets][nCounters]int64{}, [nCounters]int64{}, idx, true
	case idx > c.head:
		for i := c.head + 1; i <= idx; i++ {
			b := &c.b[window.Mod(i, windowBuckets)]
			for k := range b {
				c.sum[k] -= b[k]
				b[k] = 0
			}
		}
		c.head = idx
	}
	return &c.b[window.Mod(c.head, windowBuckets)]
}

func (c *counts) add(now int64, k int, n int64) {
	c.advance(now)[k] += n
	c.sum[k] += n
}

// total is counter k over the window ending at now.
func (c *counts) total(now int64, k int) int64 {
	c.advance(now)
	return c.sum[k]
}
