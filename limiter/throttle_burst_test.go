package limiter_test

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"

	"sluice/config"
	"sluice/internal/passcheck"
	"sluice/limiter"
)

// burstRule is a throttle rule of count per ivMs that stores burst permits
// and queues calls up to maxQueueMs.
func burstRule(count float64, ivMs, burst, maxQueueMs int64) config.FlowRule {
	r := throttleRule(count, maxQueueMs)
	r.StatIntervalMs = ivMs
	r.BurstCount = burst
	return r
}

// spacingOf is the throttle's spacing of one call: statIntervalMs/count,
// rounded up to whole ns.
func spacingOf(count float64, iv int64) int64 { return int64(math.Ceil(float64(iv) / count)) }

// burstAt sends calls at one instant until one must wait or is refused and
// returns how many passed at once, then the waits of the next calls while
// the queue takes them (at most max).
func burstAt(c *limiter.Checker, now int64, max int) (atOnce int, waits []int64) {
	for len(waits) < max {
		tok, v := c.Enter(now, "", 1)
		if v.Blocked {
			break
		}
		tok.Exit(now, false)
		if v.Wait == 0 && len(waits) == 0 {
			atOnce++
			continue
		}
		waits = append(waits, int64(v.Wait))
	}
	return atOnce, waits
}

// TestThrottleBurstAfterIdle: a throttle rule with burstCount is Guava's
// SmoothBursty. Swept over counts, statIntervalMs, burstCount, idle lengths
// (whole spacings and fractions of one) and start phases (0 to 999 ms,
// every 37 ms):
//   - a new rule has been idle for ever: burstCount + 1 calls pass at once;
//   - after an idle of k spacings past the queue's next free slot (plus a
//     fraction of one), 1 + min(k, burstCount) calls pass at once: the call
//     whose turn came and the k permits stored meanwhile, at most burstCount;
//   - the calls after them are queued one spacing apart, the first within
//     one spacing, as without burstCount.
func TestThrottleBurstAfterIdle(t *testing.T) {
	for _, count := range []float64{1, 3, 10, 1000, 100000} {
		for _, ivMs := range []int64{100, 1000, 60000} {
			for _, burst := range []int64{1, 2, 5, 50} {
				t.Run(fmt.Sprintf("count=%g/iv=%dms/burst=%d", count, ivMs, burst), func(t *testing.T) {
					t.Parallel()
					iv := ivMs * ms
					s := spacingOf(count, iv)
					// A queue three spacings long (in whole ms, at least 1).
					queueMs := max((3*s+ms-1)/ms, 1)
					for ph := int64(0); ph < sec; ph += sweepStep {
						start := t0 - t0%sec + ph
						for _, k := range []int64{0, 1, burst - 1, burst, burst + 1, 3 * burst} {
							for _, frac := range []int64{0, s / 2, s - 1} {
								checkBurstCase(t, count, iv, burst, queueMs, start, k, frac)
							}
						}
					}
				})
			}
		}
	}
}

func checkBurstCase(t *testing.T, count float64, iv, burst, queueMs, start, k, frac int64) {
	t.Helper()
	s := spacingOf(count, iv)
	c := compile(t, burstRule(count, iv/ms, burst, queueMs)).Checker("r", "default")
	maxQueued := int(queueMs * ms / s)
	atOnce, waits := burstAt(c, start, maxQueued+1)
	if atOnce != int(burst)+1 {
		t.Fatalf("phase %d ms: a new rule passed %d at once, want burstCount+1 = %d", (start%sec)/ms, atOnce, burst+1)
	}
	checkSpaced(t, "new rule", waits, s, s)
	// The queue's last slot, and the next free one after it.
	last := start + int64(len(waits))*s
	now := last + s + k*s + frac
	atOnce, waits = burstAt(c, now, 3)
	want := 1 + min(k, burst)
	if atOnce != int(want) {
		t.Fatalf("phase %d ms, idle %d spacings + %d ns: %d passed at once, want 1 + min(k, burstCount) = %d",
			(start%sec)/ms, k, frac, atOnce, want)
	}
	first := s // the stored permits were spent to the last: spacing from now
	if k < burst {
		first = s - frac // spacing from the last slot taken, which is frac ago
	}
	checkSpaced(t, fmt.Sprintf("idle %d spacings + %d ns", k, frac), waits, first, s)
}

// checkSpaced: the queued calls wait first, first + s, first + 2s, ...
func checkSpaced(t *testing.T, what string, waits []int64, first, s int64) {
	t.Helper()
	if len(waits) == 0 {
		t.Fatalf("%s: no call queued after the burst", what)
	}
	for i, w := range waits {
		if want := first + int64(i)*s; w != want {
			t.Fatalf("%s: queued call %d waits %d ns, want %d (spacing %d)", what, i, w, want, s)
		}
	}
}

// docs/rules.md (burstCount): "A call that takes a stored permit and is then
// not forwarded (a later rule blocks it, its client leaves) stores it
// again", also when calls after it took stored permits too, so that its
// slot is neither the queue's tail nor ahead of now. Swept over burstCount,
// how many calls took stored permits at once, which of them (not the last)
// is cancelled, and how long after (up to half a spacing): burstCount + 1
// calls are still forwarded at once, as had the cancelled call never come.
// Before, only the last one's permit was stored again; any other was lost.
func TestThrottleStoredPermitGivenBackOutOfOrder(t *testing.T) {
	s := spacingOf(10, sec)
	for _, burst := range []int64{1, 3, 5} {
		for took := int64(2); took <= burst+1; took++ {
			for k := range took - 1 {
				for _, d := range []int64{0, ms, s / 2} {
					c := compile(t, burstRule(10, 1000, burst, 0)).Checker("r", "default")
					toks := make([]limiter.Token, took)
					for i := range toks {
						var v limiter.Verdict
						if toks[i], v = c.Enter(t0, "", 1); v.Blocked || v.Wait != 0 {
							t.Fatalf("burst %d: call %d: %+v, want a stored permit", burst, i, v)
						}
					}
					toks[k].Cancel(t0+d, limiter.ReasonParam) // a later rule blocked it
					forwarded := took - 1
					for i := range toks {
						if int64(i) != k {
							toks[i].Exit(t0+d, false)
						}
					}
					atOnce, _ := burstAt(c, t0+d, 1)
					if got := forwarded + int64(atOnce); got != burst+1 {
						t.Errorf("burst %d: %d took stored permits, call %d given back %d ns later: %d forwarded at once, want burstCount+1 = %d",
							burst, took, k, d, got, burst+1)
					}
				}
			}
		}
	}
}

// TestThrottleBurstNeverOverCountPlusBurst: whatever the load, no real
// interval of statIntervalMs forwards more than count + burstCount calls,
// and a load that finds the queue idle long enough reaches that. Swept over
// counts, statIntervalMs, burstCount, queue lengths (pacing and a queue),
// start phases and loads alternating idle gaps (0 to 3 intervals) with
// overloads (1.05x to 10x) of varying length; forward times are enter +
// wait. And over calls that are not forwarded after all (a later rule
// blocks them, their client leaves) and give their slots back out of order:
//   - none: every call that passes is forwarded;
//   - at once: before each call an extra one comes at the same instant and,
//     if it took a stored permit and the call took another, is cancelled
//     after it, so a stored permit comes back while a later one is spent:
//     it is stored again, and the bound is still reached;
//   - late: about one call in four is cancelled later, a third of a spacing
//     to half an interval after it entered, in whatever order that gives:
//     a permit that comes back after the queue refilled must not pass on
//     top of the refill.
func TestThrottleBurstNeverOverCountPlusBurst(t *testing.T) {
	for _, count := range []float64{1, 3, 10, 100, 1000} {
		for _, ivMs := range []int64{100, 1000} {
			for _, burst := range []int64{1, 5, 50} {
				t.Run(fmt.Sprintf("count=%g/iv=%dms/burst=%d", count, ivMs, burst), func(t *testing.T) {
					t.Parallel()
					iv := ivMs * ms
					for _, mode := range []giveBackMode{giveBackNone, giveBackAtOnce, giveBackLate} {
						for _, queueMs := range []int64{0, max(iv/ms/2, 1)} {
							for ph := int64(0); ph < sec; ph += 4 * sweepStep {
								start := t0 - t0%sec + ph
								checkBurstBound(t, count, ivMs, burst, queueMs, start, mode)
							}
						}
					}
				})
			}
		}
	}
}

// giveBackMode is how TestThrottleBurstNeverOverCountPlusBurst gives slots
// back.
type giveBackMode int

const (
	giveBackNone giveBackMode = iota
	giveBackAtOnce
	giveBackLate
)

func (m giveBackMode) String() string { return [...]string{"none", "at once", "late"}[m] }

// pendingCancel is a call held to be cancelled at at.
type pendingCancel struct {
	at  int64
	tok limiter.Token
}

func checkBurstBound(t *testing.T, count float64, ivMs, burst, queueMs, start int64, mode giveBackMode) {
	t.Helper()
	iv := ivMs * ms
	s := spacingOf(count, iv)
	c := compile(t, burstRule(count, ivMs, burst, queueMs)).Checker("r", "default")
	var fwd []int64
	var pending []pendingCancel
	// cancelUntil cancels, in time order, the held calls due by now
	// (pending is kept sorted by at).
	cancelUntil := func(now int64) {
		k := 0
		for ; k < len(pending) && pending[k].at <= now; k++ {
			pending[k].tok.Cancel(pending[k].at, limiter.ReasonParam)
		}
		pending = pending[k:]
	}
	delays := []int64{s / 3, s, 2 * s, int64(burst) * s, iv / 2}
	calls := 0
	now := start
	// A deterministic mix of gaps and overloads.
	for round := int64(0); round < 8; round++ {
		now += (round * 7 % 4) * iv * 3 / 4 // idle 0, 3/4, 6/4 or 9/4 intervals
		over := []float64{10, 1.05, 1.5, 3}[round%4]
		step := float64(s) / over
		end := now + iv*(1+round%3)
		for at := float64(now); int64(at) < end; at += step {
			now := int64(at)
			cancelUntil(now)
			var extra limiter.Token
			var ve limiter.Verdict
			if mode == giveBackAtOnce {
				if extra, ve = c.Enter(now, "", 1); ve.Wait > 0 {
					// Not a stored permit: a queued slot given back behind
					// later calls is a hole, another subject.
					extra.Cancel(now, limiter.ReasonParam)
				}
			}
			tok, v := c.Enter(now, "", 1)
			if mode == giveBackAtOnce && !ve.Blocked && ve.Wait == 0 {
				if v.Blocked || v.Wait > 0 {
					// The extra call took the last stored permit: both
					// leave, latest first, and the call tries again.
					tok.Cancel(now, limiter.ReasonNone)
					extra.Cancel(now, limiter.ReasonParam)
					tok, v = c.Enter(now, "", 1)
				} else {
					// Out of order: the call's stored permit is the tail.
					extra.Cancel(now, limiter.ReasonParam)
				}
			}
			calls++
			switch {
			case v.Blocked:
			case mode == giveBackLate && calls%4 == 1:
				p := pendingCancel{now + delays[(calls/4)%len(delays)], tok}
				i, _ := slices.BinarySearchFunc(pending, p, func(a, b pendingCancel) int { return cmp.Compare(a.at, b.at+1) })
				pending = slices.Insert(pending, i, p)
			default:
				fwd = append(fwd, now+int64(v.Wait))
				tok.Exit(now, false)
			}
		}
		now = end
	}
	cancelUntil(math.MaxInt64)
	sortInt64(fwd)
	got, limit := passcheck.MostInInterval(fwd, iv), int(count)+int(burst)
	if got > limit {
		t.Fatalf("give-backs %v, queue %d ms, phase %d ms: a real interval of %d ms forwarded %d, want <= count + burstCount = %d",
			mode, queueMs, (start%sec)/ms, ivMs, got, limit)
	}
	// The rule is new (idle for ever) when the first overload (10x) starts:
	// that interval reaches the bound, where it offers that many and the
	// spacing is exact, also when the first call of each pair gives its
	// slot back.
	if mode != giveBackLate && iv%int64(count) == 0 && 10*count >= count+float64(burst) && got != limit {
		t.Fatalf("give-backs %v, queue %d ms, phase %d ms: at most %d in an interval, want count + burstCount = %d reached after idle",
			mode, queueMs, (start%sec)/ms, got, limit)
	}
}

func sortInt64(a []int64) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}
