package limiter

import (
	"sync/atomic"

	"sluice/internal/ring"
)

const (
	nodeBuckets     = 10
	nodeBucketWidth = int64(1e9) / nodeBuckets // the Stats window is 1 s
)

// statNode holds one node's statistics: a 1 s sliding window of pass, block,
// success and error counts (in tokens) and response time, and a concurrency
// gauge. Counts are statistics, not limits: a bucket reset is serialised but
// increments racing a reset may be lost (ring.Atomic). Safe for concurrent use.
type statNode struct {
	win     ring.Atomic[statBucket, *statBucket]
	buckets [nodeBuckets]ring.Slot[statBucket] // win's slots
	conc    atomic.Int64
	pins    atomic.Int64 // calls in flight holding this node (origin LRU)
}

type statBucket struct {
	pass, block, success, errs, rtSum atomic.Int64 // rtSum: response time x tokens
}

func (b *statBucket) Reset() {
	b.pass.Store(0)
	b.block.Store(0)
	b.success.Store(0)
	b.errs.Store(0)
	b.rtSum.Store(0)
}

func newStatNode() *statNode {
	n := &statNode{}
	n.win.Init(nodeBucketWidth, n.buckets[:])
	return n
}

func (n *statNode) pin()       { n.pins.Add(1) }
func (n *statNode) unpin()     { n.pins.Add(-1) }
func (n *statNode) busy() bool { return n.pins.Load() > 0 }

func (n *statNode) addPass(now, k int64) {
	if b := n.win.At(now); b != nil {
		b.pass.Add(k)
	}
	n.conc.Add(1)
}

func (n *statNode) addBlock(now, k int64) {
	if b := n.win.At(now); b != nil {
		b.block.Add(k)
	}
}

// undoPass takes back a pass counted at enter if its bucket is still current.
func (n *statNode) undoPass(enter, k int64) {
	if b := n.win.Still(enter); b != nil {
		b.pass.Add(-k)
	}
	n.conc.Add(-1)
}

func (n *statNode) complete(now, k, rt int64, failed bool) {
	n.conc.Add(-1)
	b := n.win.At(now)
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
	e := n.win.Num(now)
	var s int64
	for i := range nodeBuckets {
		if b := n.win.Live(e, i); b != nil {
			s += b.pass.Load()
		}
	}
	return s
}

func (n *statNode) stats(now int64) NodeStats {
	e := n.win.Num(now)
	var pass, block, succ, errs, rt int64
	for i := range nodeBuckets {
		if b := n.win.Live(e, i); b != nil {
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
