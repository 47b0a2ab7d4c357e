package limiter

import (
	"math"
	"sync"
	"sync/atomic"

	"sluice/limiter/window"
)

const (
	nodeBuckets     = 10
	nodeBucketWidth = int64(1e9) / nodeBuckets // the Stats window is 1 s
)

// statNode holds one node's statistics: a 1 s sliding window of pass, block,
// success and error counts (in tokens) and response time, and a concurrency
// gauge. Counts are statistics, not limits: a bucket reset is serialised by mu
// but increments racing a reset may be lost. Safe for concurrent use.
type statNode struct {
	mu      sync.Mutex // serialises bucket resets
	buckets [nodeBuckets]statBucket
	conc    atomic.Int64
	pins    atomic.Int64 // calls in flight holding this node (origin LRU)
}

type statBucket struct {
	epoch                             atomic.Int64
	pass, block, success, errs, rtSum atomic.Int64 // rtSum: response time x tokens
}

func newStatNode() *statNode {
	n := &statNode{}
	for i := range n.buckets {
		n.buckets[i].epoch.Store(math.MinInt64)
	}
	return n
}

func (n *statNode) pin()       { n.pins.Add(1) }
func (n *statNode) unpin()     { n.pins.Add(-1) }
func (n *statNode) busy() bool { return n.pins.Load() > 0 }

func (n *statNode) bucket(now int64) *statBucket {
	e := window.FloorDiv(now, nodeBucketWidth)
	b := &n.buckets[window.Mod(e, nodeBuckets)]
	if b.epoch.Load() != e {
		return n.rotate(b, e)
	}
	return b
}

// rotate resets b for epoch e, unless it already holds a newer one.
func (n *statNode) rotate(b *statBucket, e int64) *statBucket {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := b.epoch.Load()
	if old > e {
		return nil // now is older than the ring: drop the count
	}
	if old < e {
		b.pass.Store(0)
		b.block.Store(0)
		b.success.Store(0)
		b.errs.Store(0)
		b.rtSum.Store(0)
		b.epoch.Store(e) // last: writers that see e find the bucket zeroed
	}
	return b
}

func (n *statNode) addPass(now, k int64) {
	if b := n.bucket(now); b != nil {
		b.pass.Add(k)
	}
	n.conc.Add(1)
}

func (n *statNode) addBlock(now, k int64) {
	if b := n.bucket(now); b != nil {
		b.block.Add(k)
	}
}

// undoPass takes back a pass counted at enter if its bucket is still current.
func (n *statNode) undoPass(enter, k int64) {
	e := window.FloorDiv(enter, nodeBucketWidth)
	b := &n.buckets[window.Mod(e, nodeBuckets)]
	if b.epoch.Load() == e {
		b.pass.Add(-k)
	}
	n.conc.Add(-1)
}

func (n *statNode) complete(now, k, rt int64, failed bool) {
	n.conc.Add(-1)
	b := n.bucket(now)
	if b == nil {
		return
	}
	if failed {
		b.errs.Add(k)
	} else {
		b.success.Add(k)
	}
	b.rtSum.Add(rt * k)
}

// passes returns the tokens passed in the last second.
func (n *statNode) passes(now int64) int64 {
	e := window.FloorDiv(now, nodeBucketWidth)
	var s int64
	for i := range n.buckets {
		b := &n.buckets[i]
		if d := e - b.epoch.Load(); d >= 0 && d < nodeBuckets {
			s += b.pass.Load()
		}
	}
	return s
}

func (n *statNode) stats(now int64) NodeStats {
	e := window.FloorDiv(now, nodeBucketWidth)
	var pass, block, succ, errs, rt int64
	for i := range n.buckets {
		b := &n.buckets[i]
		if d := e - b.epoch.Load(); d >= 0 && d < nodeBuckets {
			pass += b.pass.Load()
			block += b.block.Load()
			succ += b.success.Load()
			errs += b.errs.Load()
			rt += b.rtSum.Load()
		}
	}
	s := NodeStats{PassQps: float64(pass), BlockQps: float64(block), SuccessQps: float64(succ), ErrorQps: float64(errs), Concurrency: n.conc.Load()}
	if done := succ + errs; done > 0 {
		s.AvgRtMs = float64(rt) / float64(done) / 1e6
	}
	return s
}
