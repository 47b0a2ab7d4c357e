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
	open     atomic.Int64 // of inFlight, the tunnels and streams (Token.Answered)

	mu   sync.Mutex
	fine ring.Ring[fineBucket, *fineBucket]
	sec  ring.Ring[secBucket, *secBucket]
	// since is the first success after sec held none (at start, after ten
	// idle seconds): a second that began before it holds a sliver of a
	// second's traffic, no evidence of what a second carries.
	since int64
}

// fineBucket: the calls completed (rtSum: their response times, ns), and
// apart the answered ones (Token.Answered: a tunnel's or a stream's head),
// which count for maxAvgRtMs but not for the adaptive check's recent time.
type fineBucket struct{ done, rtSum, heads, headRt int64 }

func (b *fineBucket) Add(o fineBucket) {
	b.done += o.done
	b.rtSum += o.rtSum
	b.heads += o.heads
	b.headRt += o.headRt
}

func (b *fineBucket) Sub(o fineBucket) {
	b.done -= o.done
	b.rtSum -= o.rtSum
	b.heads -= o.heads
	b.headRt -= o.headRt
}

// secBucket holds one second of successful calls, for the BBR estimate,
// and the calls the adaptive check shed in it.
type secBucket struct{ succ, rtSum, shed int64 }

func (b *secBucket) Add(o secBucket) { b.succ += o.succ; b.rtSum += o.rtSum; b.shed += o.shed }
func (b *secBucket) Sub(o secBucket) { b.succ -= o.succ; b.rtSum -= o.rtSum; b.shed -= o.shed }

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
	return f.done + f.heads, f.rtSum + f.headRt
}

// headed records an answered call's head (Token.Answered) at now, rt after
// it was forwarded (mu held).
func (s *stats) headed(now, rt int64) { s.fine.Add(now, fineBucket{heads: 1, headRt: rt}) }

// recentBuckets is how many of the newest fine buckets tell whether calls
// queue now: 150 to 200 ms, a few calls' time, so that the guard sees a
// queue form within a fraction of a second rather than when it has moved a
// whole second's average.
const recentBuckets = 4

// recentCalls is the fewest calls whose average tells: with fewer in the
// newest buckets, the whole fine window (a second) is read.
const recentCalls = 8

// recentRt is the average response time of the calls completed in the
// newest recentBuckets fine buckets, or if they hold fewer than
// recentCalls, in the whole fine window (mu held, after advance); ok is
// false when none completed in it.
func (s *stats) recentRt() (rt float64, ok bool) {
	var b fineBucket
	for k := range recentBuckets {
		b.Add(s.fine.Ago(k))
	}
	if b.done < recentCalls {
		b = s.fine.Sum()
	}
	if b.done == 0 {
		return 0, false
	}
	return float64(b.rtSum) / float64(b.done), true
}

// complete records a finished call (mu held). Every call counts towards the
// average RT (a timeout is the slowest call of all); only successes count
// towards the BBR estimate, so that fast failures do not pass for capacity.
func (s *stats) complete(now, rt int64, failed bool) {
	s.fine.Add(now, fineBucket{done: 1, rtSum: rt})
	if !failed {
		if s.sec.Advance(now); s.sec.Sum().succ == 0 {
			s.since = now
		}
		s.sec.Add(now, secBucket{succ: 1, rtSum: rt})
	}
}

// probeEvery: while the adaptive check sheds (probeAfter seconds in a row),
// one second in probeEvery admits at most half the bandwidth-delay
// product, so that the queue drains and that second's average time is the
// calls' own again. minRt is
// the smallest per-second average of ten seconds; under a long overload
// every second holds a queue, and without the drained one minRt, and with
// it the calls admitted, the queue and minRt again, grew without end (p99
// 80 ms after 10 s, 1.9 s after two minutes). TCP's BBR drains the same
// way (ProbeRTT) every ten seconds.
const probeEvery = 10

// shed counts a call the adaptive check refused (mu held, after advance).
func (s *stats) shed(now int64) { s.sec.Add(now, secBucket{shed: 1}) }

// minRtShare: a second tells minRt when it carried at least 1/minRtShare
// of the busiest second's successes. A drained second (probeEvery) carries
// more than that.
const minRtShare = 4

// probeAfter is how many seconds in a row must have shed before a second is
// drained: an overload, not a burst (a burst that shed in one second once
// halved the next for a healthy upstream).
const probeAfter = 3

// probing reports whether the current second is a drained one: its number
// a multiple of probeEvery, and each of the probeAfter seconds before it
// shed (mu held, after advance).
func (s *stats) probing() bool {
	if s.sec.Head()%probeEvery != 0 {
		return false
	}
	for k := 1; k <= probeAfter; k++ {
		if s.sec.Ago(k).shed == 0 {
			return false
		}
	}
	return true
}

// capacity estimates the bandwidth-delay product: the most calls the gateway
// completed per second in the last ten seconds times the smallest per-second
// average response time, i.e. how many calls can be in flight without
// queueing (mu held, after advance). ok is false without evidence: no
// whole second with a success yet (at start, after ten idle seconds; the
// second in which the traffic began is not whole, and gives minRt only).
//
// The current, incomplete second counts with a lower bound of its rate
// (successes so far over at least 100 ms), so a ramp-up is not mistaken
// for saturation; it can only raise the estimate. It gives no minRt: just
// after the second turns its "average" is the first few calls, and one fast
// call (a health check, a cached answer) would shrink the estimate to
// nothing and shed a healthy gateway. minRt is of completed seconds only.
func (s *stats) capacity(now int64) (calls, minRt float64, ok bool) {
	head := s.sec.Head()
	var maxRate float64
	if b := s.sec.Ago(0); b.succ > 0 { // the current second
		elapsed := max(now-head*secWidth, secWidth/10)
		maxRate = float64(b.succ) * float64(secWidth) / float64(elapsed)
	}
	var busiest int64 // of the past seconds
	for k := 1; k < s.sec.Len(); k++ {
		b := s.sec.Ago(k)
		busiest = max(busiest, b.succ)
		if b.succ > 0 && (head-int64(k))*secWidth >= s.since { // not a sliver
			ok = true
			maxRate = max(maxRate, float64(b.succ))
		}
	}
	// minRt is of the past seconds that carried a share of the busiest
	// one's calls (a sliver's too): one fast call in a quiet second (a
	// health check, a cached answer) once made minRt its time for ten
	// seconds, and the guard shed 40 % of a healthy upstream. Not of the
	// current second's projected rate: traffic rising fourfold would leave
	// no second to take minRt from.
	for k := 1; k < s.sec.Len(); k++ {
		b := s.sec.Ago(k)
		if b.succ == 0 || b.succ*minRtShare < busiest {
			continue
		}
		if rt := float64(b.rtSum) / float64(b.succ); minRt == 0 || rt < minRt {
			minRt = rt
		}
	}
	return maxRate * minRt / 1e9, minRt, ok
}
