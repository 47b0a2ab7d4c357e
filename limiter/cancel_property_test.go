package limiter_test

import (
	"slices"
	"testing"

	"sluice/config"
	"sluice/limiter"
)

// A warmUp rule whose passes are cancelled after the next token sync (a
// call held waiting by a throttle rule of the same resource whose client
// leaves, or a later guard racing the interval boundary) must get its
// tokens back, but never more than it had: a cold limiter must still pass
// count/coldFactor an interval. Giving back into the already-synced
// interval left the stored tokens above maxTok, and the allowed rate fell
// under the cold rate: a client keeping to 3 a second was refused.
func TestWarmUpCancelAfterSyncKeepsColdRate(t *testing.T) {
	f := compile(t, warmRule(9, 10, config.BehaviorWarmUp)) // cold rate exactly 3
	c := f.Checker("r", "default")
	var held []limiter.Token
	for i := int64(0); i < 3; i++ {
		tok, v := c.Enter(t0+i*100*ms, "", 1)
		if v.Blocked {
			t.Fatalf("cold call %d blocked", i)
		}
		held = append(held, tok)
	}
	// Next interval: a call syncs the tokens, then the held calls leave.
	tok, v := c.Enter(t0+sec+10*ms, "", 1)
	if v.Blocked {
		t.Fatal("call in interval 1 blocked")
	}
	for i := range held {
		held[i].Cancel(t0+sec+20*ms, limiter.ReasonNone)
	}
	tok.Exit(t0+sec+30*ms, false)
	// Interval 2: a client at the cold rate, 3 calls in the second.
	for i, at := range []int64{t0 + 2*sec + 10*ms, t0 + 2*sec + 300*ms, t0 + 2*sec + 600*ms} {
		tok, v := c.Enter(at, "", 1)
		if v.Blocked {
			t.Fatalf("interval 2, call %d at the cold rate blocked", i)
		}
		tok.Exit(at, false)
	}
}

// maxInWindow is the most instants of sorted xs in any half-open interval
// [t, t+w).
func maxInWindow(xs []int64, w int64) int {
	best, j := 0, 0
	for i := range xs {
		for xs[i]-xs[j] >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// A warm-up rule (warmUp, warmUpThrottle) whose passes are cancelled at
// random moments, up to 1.5 intervals later, by calls that keep to the cold
// rate: none of them is ever refused, and no real interval forwards more
// than count; under an overload with random cancels neither.
func TestWarmUpCancelProperty(t *testing.T) {
	seed := uint64(7)
	rnd := func(n int64) int64 {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return int64(seed % uint64(n))
	}
	for _, beh := range []config.ControlBehavior{config.BehaviorWarmUp, config.BehaviorWarmUpThrottle} {
		for _, count := range []float64{3, 6, 9, 10, 30, 99} {
			for _, phase := range []int64{0, 1, 333 * ms, 999 * ms} {
				cold := int64(count / 3)
				if cold < 1 {
					cold = 1
				}
				// The cold-rate client: cold calls a second, evenly, a quarter
				// of them cancelled later.
				r := warmRule(count, 3, beh)
				r.MaxQueueingTimeMs = 0
				c := compile(t, r).Checker("r", "default")
				var held []pendingCancel
				var fwd []int64
				step := sec / cold
				if sec%cold != 0 {
					step++
				}
				start := t0 + phase
				for i := int64(0); i < 20*cold; i++ {
					now := start + i*step
					held = cancelDue(held, now, limiter.ReasonNone)
					tok, v := c.Enter(now, "", 1)
					if v.Blocked {
						t.Fatalf("%s count %v phase %d: cold-rate call %d refused", beh, count, phase, i)
					}
					if rnd(4) == 0 {
						held = append(held, pendingCancel{tok: tok, at: now + int64(v.Wait) + rnd(3*sec/2)})
						continue
					}
					fwd = append(fwd, now+int64(v.Wait))
					tok.Exit(now, false)
				}

				// Overload at 3x count with random cancels.
				c = compile(t, warmRule(count, 3, beh)).Checker("r", "default")
				held, fwd = held[:0], fwd[:0]
				ostep := sec / int64(3*count)
				for now := start; now < start+20*sec; now += ostep {
					held = cancelDue(held, now, limiter.ReasonNone)
					tok, v := c.Enter(now, "", 1)
					if v.Blocked {
						continue
					}
					if rnd(3) == 0 {
						held = append(held, pendingCancel{tok: tok, at: now + rnd(3*sec/2)})
						continue
					}
					fwd = append(fwd, now+int64(v.Wait))
					tok.Exit(now, false)
				}
				slices.Sort(fwd)
				if got := maxInWindow(fwd, sec); float64(got) > count {
					t.Errorf("%s count %v phase %d: %d forwarded in one interval", beh, count, phase, got)
				}
			}
		}
	}
}

// Several rules on one call, the last blocking after the others passed, and
// passed calls cancelled at random moments (a later guard, or the client
// leaving while it waits for its throttle slot): the calls that went keep
// every rule (no interval of their reject decisions over the count, their
// forwarding spaced by the throttle, never more in flight than the
// concurrency count), and once all ended nothing is left held.
func TestSeveralRulesCancelProperty(t *testing.T) {
	seed := uint64(99)
	rnd := func(n int64) int64 {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return int64(seed % uint64(n))
	}
	for _, count := range []float64{5, 10, 40} {
		for _, phase := range []int64{0, 7, 450 * ms} {
			rej := qps("r", count)
			thr := throttleRule(2*count, 800)
			conc := qps("r", 3)
			conc.Grade = config.GradeConcurrency
			last := qps("r", 3*count) // blocks some calls after the others passed
			f := compile(t, rej, thr, conc, last)
			c := f.Checker("r", "default")
			type live struct {
				tok      limiter.Token
				fwd, end int64
				cancel   bool
			}
			var calls []live
			var fwd []int64
			inflight := 0
			start := t0 + phase
			step := sec / int64(6*count)
			for now := start; now < start+10*sec; now += step {
				for k := 0; k < len(calls); {
					if calls[k].end <= now {
						if calls[k].cancel {
							calls[k].tok.Cancel(calls[k].end, limiter.ReasonParam)
						} else {
							calls[k].tok.Exit(calls[k].end, false)
							inflight--
						}
						calls = append(calls[:k], calls[k+1:]...)
						continue
					}
					k++
				}
				tok, v := c.Enter(now, "", 1)
				if v.Blocked {
					continue
				}
				at := now + int64(v.Wait)
				if rnd(3) == 0 { // leaves before its slot, or a later guard stops it
					calls = append(calls, live{tok: tok, end: now + rnd(int64(v.Wait)+1), cancel: true})
					continue
				}
				fwd = append(fwd, at)
				calls = append(calls, live{tok: tok, fwd: at, end: at + rnd(300*ms)})
				inflight++ // counted from enter: Exit ends it
				if inflight > 3 {
					t.Fatalf("count %v phase %d: %d in flight", count, phase, inflight)
				}
			}
			for _, l := range calls {
				if l.cancel {
					l.tok.Cancel(start+20*sec, limiter.ReasonNone)
				} else {
					l.tok.Exit(start+20*sec, false)
				}
			}
			slices.Sort(fwd)
			// The reject rule counts a pass when the throttle rule of the
			// same call forwards it, so no real second forwards more.
			if got := maxInWindow(fwd, sec); float64(got) > count {
				t.Errorf("count %v phase %d: %d passed in one second", count, phase, got)
			}
			spacing := int64(float64(sec) / (2 * count))
			for i := 1; i < len(fwd); i++ {
				if fwd[i]-fwd[i-1] < spacing {
					t.Errorf("count %v phase %d: forwarded %d ns apart, spacing %d", count, phase, fwd[i]-fwd[i-1], spacing)
					break
				}
			}
			// All ended: three in flight at once pass, a fourth does not.
			later := start + 40*sec
			var toks []limiter.Token
			for i := 0; i < 4; i++ {
				tok, v := c.Enter(later+int64(i)*sec, "", 1)
				if blocked := v.Blocked; blocked != (i == 3) {
					t.Fatalf("count %v phase %d: in-flight call %d blocked=%v after all ended", count, phase, i, blocked)
				}
				toks = append(toks, tok)
			}
			for i := range toks {
				toks[i].Exit(later+5*sec, false)
			}
		}
	}
}

// A throttle queue (with and without burstCount) whose calls are cancelled
// at random moments, before or after their slot: a client keeping to the
// spacing is never refused, even with no queueing allowed.
func TestThrottleCancelKeepsRate(t *testing.T) {
	seed := uint64(3)
	rnd := func(n int64) int64 {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return int64(seed % uint64(n))
	}
	for _, count := range []float64{1, 7, 100, 3000} {
		for _, burst := range []int64{0, 3} {
			r := throttleRule(count, 0)
			r.BurstCount = burst
			c := compile(t, r).Checker("r", "default")
			step := int64(float64(sec)/count) + 1
			var held []pendingCancel
			for i := int64(0); i < 300; i++ {
				now := t0 + i*step
				held = cancelDue(held, now, limiter.ReasonParam)
				tok, v := c.Enter(now, "", 1)
				if v.Blocked {
					t.Fatalf("count %v burst %d: call %d keeping to the spacing refused", count, burst, i)
				}
				if rnd(3) == 0 {
					held = append(held, pendingCancel{tok: tok, at: now + rnd(2*step)})
					continue
				}
				tok.Exit(now, false)
			}
		}
	}
}

// cancelDue cancels, with reason, the calls of held (pendingCancel, as
// throttle_burst_test.go holds them) due by now, at their own instant, in
// any order, and returns the others.
func cancelDue(held []pendingCancel, now int64, reason limiter.Reason) []pendingCancel {
	for k := 0; k < len(held); {
		if held[k].at <= now {
			held[k].tok.Cancel(held[k].at, reason)
			held = append(held[:k], held[k+1:]...)
			continue
		}
		k++
	}
	return held
}
