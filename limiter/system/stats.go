package system

import (
	"sync"
	"sync/atomic"

	"sluice/limiter/window"
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
	minInt64    = -1 << 63
)

// stats is the gateway-wide statistics a Guard checks. A reload hands the
// same *stats to the new Guard, so in-flight counts and windows carry over.
//
// inFlight is an atomic; everything else is guarded by mu.
// Invariant: done, rtSum are the sums of fine buckets fineHead-20 ..
// fineHead, and every bucket outside the window is zero (same for sec).
type stats struct {
	inFlight atomic.Int64

	mu       sync.Mutex
	fineHead int64
	fine     [fineRing]fineBucket
	done     int64 // completed calls in the window
	rtSum    int64 // their response times, ns

	secHead int64
	sec     [secBuckets]secBucket
}

type fineBucket struct{ done, rtSum int64 }

// secBucket holds one second of successful calls, for the BBR estimate.
type secBucket struct{ succ, rtSum int64 }

func newStats() *stats { return &stats{fineHead: minInt64, secHead: minInt64} }

// advance slides both windows to now (mu held). An instant older than the
// newest bucket counts as the newest: concurrent calls finish out of order.
func (s *stats) advance(now int64) {
	if idx := window.FloorDiv(now, fineWidth); idx > s.fineHead {
		if s.fineHead == minInt64 || idx-s.fineHead >= fineRing {
			s.fine = [fineRing]fineBucket{}
			s.done, s.rtSum = 0, 0
		} else {
			for i := s.fineHead + 1; i <= idx; i++ {
				b := &s.fine[window.Mod(i, fineRing)]
				s.done -= b.done
				s.rtSum -= b.rtSum
				*b = fineBucket{}
			}
		}
		s.fineHead = idx
	}
	if idx := window.FloorDiv(now, secWidth); idx > s.secHead {
		if s.secHead == minInt64 || idx-s.secHead >= secBuckets {
			s.sec = [secBuckets]secBucket{}
		} else {
			for i := s.secHead + 1; i <= idx; i++ {
				s.sec[window.Mod(i, secBuckets)] = secBucket{}
			}
		}
		s.secHead = idx
	}
}

// complete records a finished call (mu held). Every call counts towards the
// average RT (a timeout is the slowest call of all); only successes count
// towards the BBR estimate, so that fast failures do not pass for capacity.
func (s *stats) complete(now, rt int64, failed bool) {
	s.advance(now)
	b := &s.fine[window.Mod(s.fineHead, fineRing)]
	b.done++
	b.rtSum += rt
	s.done++
	s.rtSum += rt
	if !failed {
		sb := &s.sec[window.Mod(s.secHead, secBuckets)]
		sb.succ++
		sb.rtSum += rt
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
// for saturation; it can only raise the estimate.
func (s *stats) capacity(now int64) (calls float64, ok bool) {
	cur := window.Mod(s.secHead, secBuckets)
	var maxRate, minRt float64
	for i := range s.sec {
		b := s.sec[i]
		if b.succ == 0 {
			continue
		}
		rate := float64(b.succ)
		if int64(i) == cur {
			elapsed := max(now-s.secHead*secWidth, secWidth/10)
			rate = float64(b.succ) * float64(secWidth) / float64(elapsed)
		} else {
			ok = true
		}
		maxRate = max(maxRate, rate)
		if rt := float64(b.rtSum) / float64(b.succ); minRt == 0 || rt < minRt {
			minRt = rt
		}
	}
	return maxRate * minRt / 1e9, ok
}
