package upstream

import buckets "sluice/internal/ring"

// Counters a window keeps.
const (
	cRequests = iota // attempts sent (a target) or client requests (an upstream)
	cErrors          // attempts that failed
	cRetries         // retries
	nCounters
)

// windowBuckets is how many buckets a window has: it covers the current
// bucket and the windowBuckets-1 before it.
const windowBuckets = 10

// tally is one bucket of a counts window: nCounters counts.
type tally [nCounters]int64

func (t *tally) Add(o tally) {
	for k := range t {
		t[k] += o[k]
	}
}

func (t *tally) Sub(o tally) {
	for k := range t {
		t[k] -= o[k]
	}
}

// counts is a sliding window of windowBuckets buckets of width ns, each
// holding nCounters counts. Not safe for concurrent use: its owner's mutex
// guards it. Build it with newCounts.
type counts struct{ r buckets.Ring[tally, *tally] }

func newCounts(width int64) counts { return counts{buckets.New[tally](windowBuckets, width)} }

func (c *counts) add(now int64, k int, n int64) {
	var d tally
	d[k] = n
	c.r.Add(now, d)
}

// total is counter k over the window ending at now.
func (c *counts) total(now int64, k int) int64 {
	return c.r.Total(now)[k]
}
