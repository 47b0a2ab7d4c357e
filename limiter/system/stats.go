package system

import (
	"sync"
	"sync/atomic"
)

// Window geometry. The last-second window is the current 50 ms bucket and the
// 20 before it (fineRing buckets): a bucket leaves only once a full second has
// passed since its end, so every pass of a real one-second interval was still
// counted when the last of them was checked, and no real second passes more
// than maxQps, at any overload and from any start. (Dropping a bucket one
// second after its start let the passes made late in it be followed by a full
// maxQps more: up to 2x.) The price: under a steady overload maxQps passes
// per 1.05 s, 20/21 of maxQps. The completed calls' average RT is taken over
// the same 1 to 1.05 s. The BBR history has ten one-second buckets.
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
// Invariant: pass, done, rtSum are the sums of fine buckets fineHead-20 ..
// fineHead, and every bucket outside the window is zero (same for sec).
type stats struct {
	inFlight atomic.Int64

	mu       sync.Mutex
	fineHead int64
	fine     [fineRing]fineBucket
	pass     int64 // passes in the window
	done     int64 // completed calls in the window
	rtSum    int64 // their response times, ns

	secHead int64
	sec     [secBuckets]secBucket
}

type fineBucket struct{ pass, done, rtSum int64 }

// secBucket holds one second of successful calls, for the BBR estimate.
type secBucket struct{ succ, rtSum int64 }

func newStats() *stats { return &stats{fineHead: minInt64, secHead: minInt64} }

// floorDiv is a/b rounded towards minus infinity: instants may be negative.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func mod(i, n int64) int64 {
	m := i % n
	if m < 0 {
		m += n
	}
	return m
}

// advance slides both windows to now (mu held). An instant older than the
// newest bucket counts as the newest: concurrent calls finish out of order.
func (s *stats) advance(now int64) {
	if idx := floorDiv(now, fineWidth); idx > s.fineHead {
		if s.fineHead == minInt64 || idx-s.fineHead >= fineRing {
			s.fine = [fineRing]fineBucket{}
			s.pass, s.done, s.rtSum = 0, 0, 0
		} else {
			for i := s.fineHead + 1; i <= idx; i++ {
				b := &s.fine[mod(i, fineRing)]
				s.pass -= b.pass
				s.done -= b.done
				s.rtSum -= b.rtSum
				*b = fineBucket{}
			}
		}
		s.fineHead = idx
	}
	if idx := floorDiv(now, secWidth); idx > s.secHead {
		if s.secHead == minInt64 || idx-s.secHead >= secBuckets {
			s.sec = [secBuckets]secBucket{}
		} else {
			for i := s.secHead + 1; i <= idx; i++ {
				s.sec[mod(i, secBuckets)] = secBucket{}
			}
		}
		s.secHead = idx
	}
}

// addPass counts a pass at now and returns the bucket it went to (mu held).
func (s *stats) addPass(now int64) int64 {
	s.advance(now)
	s.fine[mod(s.fineHead, fineRing)].pass++
	s.pass++
	return s.fineHead
}

// unPass takes back a pass counted in bucket idx, if it is still in the window.
func (s *stats) unPass(now, idx int64) {
	s.advance(now)
	if idx > s.fineHead-fineRing && idx <= s.fineHead {
		s.fine[mod(idx, fineRing)].pass--
		s.pass--
	}
}

// complete records a finished call (mu held). Every call counts towards the
// average RT (a timeout is the slowest call of all); only successes count
// towards the BBR estimate, so that fast failures do not pass for capacity.
func (s *stats) complete(now, rt int64, failed bool) {
	s.advance(now)
	b := &s.fine[mod(s.fineHead, fineRing)]
	b.done++
	b.rtSum += rt
	s.done++
	s.rtSum += rt
	if !failed {
		sb := &s.sec[mod(s.secHead, secBuckets)]
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
	cur := mod(s.secHead, secBuckets)
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
