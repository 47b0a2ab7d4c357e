package system

import (
	"sync"
	"sync/atomic"

	"sluice/internal/ring"
)

// Window geometry. The completed calls' average RT is taken over the current
// 50 ms bucket and the 20 before it (1 to 1.05 s); the BBR history has ten
// one-second buckets. maxQps is decided in an exact window of its own (see
// Guard).
const (
	fineBuckets = 20
	fineRing    = fineBuckets + 1
	fineWidth   = int64(1e9) / fineBuckets
	secBuckets  = 10
	secWidth    = int64(1e9)
)

// stats is the gateway-wide statistics a Guard checks. A reload hands the
// same *stats to the new Guard, so in-flight counts and windows carry over.
//
// inFlight is an atomic; everything else is guarded by mu. fine's sum is the
// completed calls of the last 1 to 1.05 s; sec's buckets are read one by one.
type stats struct {
	inFlight atomic.Int64

	mu   sync.Mutex
	fine ring.Ring[fineBucket, *fineBucket]
	sec  ring.Ring[secBucket, *secBucket]
}

type fineBucket struct{ done, rtSum int64 } // rtSum: their response times, ns

func (b *fineBucket) Add(o fineBucket) { b.done += o.done; b.rtSum += o.rtSum }
func (b *fineBucket) Sub(o fineBucket) { b.done -= o.done; b.rtSum -= o.rtSum }

// secBucket holds one second of successful calls, for the BBR estimate.
type secBucket struct{ succ, rtSum int64 }

func (b *secBucket) Add(o secBucket) { b.succ += o.succ; b.rtSum += o.rtSum }
func (b *secBucket) Sub(o secBucket) { b.succ -= o.succ; b.rtSum -= o.rtSum }

func newStats() *stats {
	return &stats{
		fine: ring.New[fineBucket](fineRing, fineWidth),
		sec:  ring.New[secBucket](secBuckets, secWidth),
	}
}

// take counts a call in flight unless maxConc (0: no limit) are already,
// and returns how many others were.
func (s *stats) take(maxConc int64) (others int64, ok bool) {
	if maxConc <= 0 {
		return s.inFlight.Add(1) - 1, true
	}
	for {
		n := s.inFlight.Load()
		if n >= maxConc {
			return n, false
		}
		if s.inFlight.CompareAndSwap(n, n+1) {
			return n, true
		}
	}
}

// advance slides both windows to now (mu held). An instant older than the
// newest bucket counts as the newest: concurrent calls finish out of order.
func (s *stats) advance(now int64) {
	s.fine.Advance(now)
	s.sec.Advance(now)
}

// completed is the calls completed in the fine window and the sum of their
// response times, ns (mu held, after advance).
func (s *stats) completed() (done, rtSum int64) {
	f := s.fine.Sum()
	return f.done, f.rtSum
}

// complete records a finished call (mu held). Every call counts towards the
// average RT (a timeout is the slowest call of all); only successes count
// towards the BBR estimate, so that fast failures do not pass for capacity.
func (s *stats) complete(now, rt int64, failed bool) {
	s.fine.Add(now, fineBucket{done: 1, rtSum: rt})
	if !failed {
		s.sec.Add(now, secBucket{succ: 1, rtSum: rt})
	}
}

// capacity estimates the bandwidth-delay product: the most calls the gateway
// completed per second in the last ten seconds times the smallest per-second
// average response time, i.e. how many calls can be in flight without
// queueing (mu held, after advance). ok is false without evidence: no
// completed second with a success yet (at start, after ten idle seconds).
//
// The current, incomplete second counts with a lower bound of its rate
// (successes so far over at least 100 ms), so a ramp-up is not mistaken
// for saturation; it can only raise the estimate. It gives no minRt: just
// after the second turns its "average" is the first few calls, and one fast
// call (a health check, a cached answer) would shrink the estimate to
// nothing and shed a healthy gateway. minRt is of completed seconds only.
func (s *stats) capacity(now int64) (calls float64, ok bool) {
	cur, head := s.sec.NewestSlot(), s.sec.Head()
	var maxRate, minRt float64
	for i, b := range s.sec.Slots() {
		if b.succ == 0 {
			continue
		}
		if i == cur {
			elapsed := max(now-head*secWidth, secWidth/10)
			maxRate = max(maxRate, float64(b.succ)*float64(secWidth)/float64(elapsed))
			continue
		}
		ok = true
		maxRate = max(maxRate, float64(b.succ))
		if rt := float64(b.rtSum) / float64(b.succ); minRt == 0 || rt < minRt {
			minRt = rt
		}
	}
	return maxRate * minRt / 1e9, ok
}
