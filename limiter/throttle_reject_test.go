package limiter_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter"
)

// A call that a qps reject rule and a throttle rule both apply to counts
// its reject pass at the moment the throttle queue forwards it. Swept over
// reject counts, throttle rates, queue bounds (one longer than the reject
// interval), overloads, start phases and rule order, with calls arriving at
// random times and a fifth of them leaving the queue before their slot:
// in no real second do more than count forwarded calls reach the upstream,
// no call is refused while the reject window had room at the moment it
// would have been forwarded, and the throttle spacing holds.
//
// The moment a refused call would have been forwarded is read from a
// shadow checker holding the throttle rule alone, fed the same calls,
// refusals and cancels: the reject rule must not move the throttle slots.
func TestThrottleRejectForwardedPassProperty(t *testing.T) {
	for _, count := range []float64{1, 3, 5, 10, 40} {
		for _, thrF := range []float64{0.5, 1, 2} {
			for _, queueMs := range []int64{0, 300, 2500} {
				for _, over := range []float64{1.5, 4} {
					for _, phase := range []int64{0, 7, 450 * ms} {
						for _, rejectFirst := range []bool{true, false} {
							name := fmt.Sprintf("count %v throttle %v queue %dms over %v phase %d rejectFirst %v",
								count, thrF*count, queueMs, over, phase, rejectFirst)
							checkThrottleReject(t, name, count, thrF*count, queueMs, over, t0-t0%sec+phase, rejectFirst, -1)
						}
					}
				}
			}
		}
	}
}

// TestThrottleRejectForwardedPassProperty for prioritized calls (occupy
// 0 and 300 ms): a pass is reserved no earlier than the call's throttle
// slot, so the same bound holds, and a call is refused only if no moment
// from its slot to its occupy deadline (or the slot alone, if later) has
// room. (Before, a pass was reserved from the call's arrival on, and
// three calls of a 2-per-second rule could reach the upstream within
// 900 ms.)
func TestThrottleRejectPrioritizedProperty(t *testing.T) {
	for _, count := range []float64{1, 5, 10} {
		for _, thrF := range []float64{0.5, 2} {
			for _, queueMs := range []int64{300, 2500} {
				for _, over := range []float64{1.5, 4} {
					for _, phase := range []int64{0, 450 * ms} {
						for _, occupy := range []int64{0, 300 * ms} {
							name := fmt.Sprintf("count %v throttle %v queue %dms over %v phase %d occupy %d",
								count, thrF*count, queueMs, over, phase, occupy)
							checkThrottleReject(t, name, count, thrF*count, queueMs, over, t0-t0%sec+phase, phase == 0, occupy)
						}
					}
				}
			}
		}
	}
}

// checkThrottleReject drives one case: prio < 0 plain calls, else
// prioritized ones that may wait prio ns.
func checkThrottleReject(t *testing.T, name string, count, thr float64, queueMs int64, over float64, start int64, rejectFirst bool, prio int64) {
	t.Helper()
	rej, th := qps("r", count), throttleRule(thr, queueMs)
	rules, rejOrd := []config.FlowRule{rej, th}, 0
	if !rejectFirst {
		rules, rejOrd = []config.FlowRule{th, rej}, 1
	}
	c := compile(t, rules...).Checker("r", "default")
	shadow := compile(t, th).Checker("r", "default")

	seed := uint64(count*1000+thr*10+over) ^ uint64(start) ^ uint64(queueMs)<<20
	rnd := func(n int64) int64 {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return int64(seed % uint64(n))
	}
	type leaving struct {
		at, fwd   int64
		tok, shad limiter.Token
	}
	var leave []leaving // by at
	m := passModel{iv: sec, limit: int64(count)}
	var fwd []int64
	refused, passed := 0, 0
	gap := int64(float64(sec) / (over * max(count, thr)))
	for now := start; now < start+4*sec; now += rnd(2*gap) + 1 {
		for len(leave) > 0 && leave[0].at <= now {
			l := leave[0]
			leave = leave[1:]
			l.tok.Cancel(l.at, limiter.ReasonNone)
			l.shad.Cancel(l.at, limiter.ReasonNone)
			m.remove(l.fwd)
		}
		stok, sv := shadow.Enter(now, "", 1)
		var tok limiter.Token
		var v limiter.Verdict
		if prio < 0 {
			tok, v = c.Enter(now, "", 1)
		} else {
			tok, v = c.EnterPrioritized(now, "", 1, prio)
		}
		if sv.Blocked {
			if !v.Blocked {
				t.Fatalf("%s: call at +%d passed where the throttle queue alone is full", name, now-start)
			}
			continue
		}
		at := now + int64(sv.Wait)
		if v.Blocked {
			refused++
			stok.Cancel(now, limiter.ReasonNone) // its slot given back, as the refused call's
			if prio < 0 && m.fits(at) || prio >= 0 && m.roomWithin(at, max(at, now+prio)) {
				t.Fatalf("%s: call at +%d refused, yet the reject window had room at its forward moment +%d", name, now-start, at-start)
			}
			if !v.HasQuota || v.Quota.Rule != rejOrd || v.Quota.Limit != count || v.Quota.Window != time.Second {
				t.Fatalf("%s: refusal carries quota %+v, want the reject rule's (rule %d)", name, v.Quota, rejOrd)
			}
			continue
		}
		if v.Wait != sv.Wait && (prio < 0 || v.Wait < sv.Wait || v.Wait > max(sv.Wait, time.Duration(prio))) {
			t.Fatalf("%s: call at +%d waits %v, the throttle queue alone %v", name, now-start, v.Wait, sv.Wait)
		}
		at = now + int64(v.Wait)
		if !m.fits(at) {
			t.Fatalf("%s: call at +%d forwarded at +%d with no room in the reject window", name, now-start, at-start)
		}
		m.add(at)
		if v.Wait > 0 && rnd(5) == 0 { // its client leaves the queue
			l := leaving{at: now + rnd(int64(v.Wait)), fwd: at, tok: tok, shad: stok}
			k, _ := slices.BinarySearchFunc(leave, l.at, func(x leaving, a int64) int { return int(x.at - a) })
			leave = slices.Insert(leave, k, l)
			continue
		}
		passed++
		fwd = append(fwd, at)
		tok.Exit(at, false)
		stok.Exit(at, false)
	}
	slices.Sort(fwd)
	if got := maxInWindow(fwd, sec); float64(got) > count {
		t.Fatalf("%s: %d forwarded in one real second, count %v", name, got, count)
	}
	spacing := spacingOf(thr, sec)
	for i := 1; i < len(fwd) && prio < 0; i++ { // a prioritized call may wait past its slot
		if fwd[i]-fwd[i-1] < spacing {
			t.Fatalf("%s: forwarded %d ns apart, spacing %d", name, fwd[i]-fwd[i-1], spacing)
		}
	}
	if passed == 0 {
		t.Fatalf("%s: nothing forwarded (%d refused)", name, refused)
	}
}

// A queue longer than the reject rule's interval: each call is forwarded
// two seconds after the one before, when a 1-per-second window has room,
// so none is refused, the last one waiting four seconds.
func TestThrottleRejectWaitBeyondInterval(t *testing.T) {
	c := compile(t, qps("r", 1), throttleRule(0.5, 5000)).Checker("r", "default")
	for i := int64(0); i < 3; i++ {
		tok, v := c.Enter(t0+i*ms, "", 1)
		if want := time.Duration(2*i*sec - i*ms); v.Blocked || v.Wait != want {
			t.Fatalf("call %d: blocked %v wait %v, want forwarded after %v", i, v.Blocked, v.Wait, want)
		}
		tok.Exit(t0+2*i*sec, false)
	}
}

// A refused call gives its throttle slot back, and a call that leaves the
// queue gives back its reserved reject pass, so that the next caller
// takes both at once.
func TestThrottleRejectGivesBack(t *testing.T) {
	c := compile(t, qps("r", 2), throttleRule(10, 1000)).Checker("r", "default")
	a, _ := c.Enter(t0, "", 1)
	a.Exit(t0, false)
	b, v := c.Enter(t0, "", 1)
	if v.Blocked || v.Wait != 100*time.Millisecond {
		t.Fatalf("second call: %+v, want queued 100ms", v)
	}
	if _, v := c.Enter(t0, "", 1); !v.Blocked || v.Quota.Rule != 0 || v.Quota.Remaining != 0 {
		t.Fatalf("third call (third pass in the second): %+v, want refused by the reject rule", v)
	}
	b.Cancel(t0+ms, limiter.ReasonNone)
	tok, v := c.Enter(t0+2*ms, "", 1)
	if v.Blocked || v.Wait != 98*time.Millisecond {
		t.Fatalf("after the cancel: %+v, want the slot of +100ms and its pass", v)
	}
	tok.Exit(t0+100*ms, false)
}

// A per-origin reject rule and a throttle rule for all callers: the
// origin's pass is counted when the queue forwards it, so a call that the
// window has room for by then is not refused, whatever it held at its
// arrival; another origin is not counted there.
func TestThrottleRejectOrigin(t *testing.T) {
	perA := qps("r", 1)
	perA.LimitApp = "a"
	perA.StatIntervalMs = 300
	c := compile(t, throttleRule(5, 1000), perA).Checker("r", "default")
	var waits []time.Duration
	for i, o := range []string{"a", "b", "a", "a"} {
		tok, v := c.Enter(t0+int64(i)*ms, o, 1)
		if v.Blocked {
			if i != 3 || v.Quota.Rule != 1 {
				t.Fatalf("call %d (%s): %+v", i, o, v)
			}
			continue
		}
		if i == 3 {
			t.Fatalf("call 3 forwarded at +%v, 200ms after a's last: want refused", v.Wait)
		}
		waits = append(waits, v.Wait)
		tok.Exit(t0, false)
	}
	// a at 0, b at 200ms, a at 400ms: 400ms after a's first, room.
	if want := []time.Duration{0, 199 * time.Millisecond, 398 * time.Millisecond}; !slices.Equal(waits, want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
}

// A dryRun reject rule next to a throttle rule decides as the enforced
// rule would, at the forward moment: a call its window has room for by
// then is no would-be block, one it has none for is, and neither is
// refused or delayed beyond its slot.
func TestThrottleRejectDryRun(t *testing.T) {
	dry := qps("r", 1)
	dry.StatIntervalMs = 100
	dry.DryRun = true
	c := compile(t, dry, throttleRule(20, 1000)).Checker("r", "default")
	for i, want := range []struct {
		wait time.Duration
		dry  int
	}{{0, 0}, {49 * time.Millisecond, 1}, {98 * time.Millisecond, 0}} {
		tok, v := c.Enter(t0+int64(i)*ms, "", 1)
		if v.Blocked || v.Wait != want.wait || v.DryRun != want.dry {
			t.Fatalf("call %d: blocked %v wait %v dryRun %d, want wait %v dryRun %d", i, v.Blocked, v.Wait, v.DryRun, want.wait, want.dry)
		}
		tok.Exit(t0, false)
	}
}

// A call that a throttle rule and reject rules (one dryRun) apply to
// allocates nothing, passed, reserved ahead or refused at its slot.
func TestThrottleRejectAllocatesNothing(t *testing.T) {
	dry := qps("r", 3)
	dry.DryRun = true
	c := compile(t, qps("r", 5), throttleRule(20, 500), dry).Checker("r", "default")
	now := t0
	passed, refused := 0, 0
	allocs := testing.AllocsPerRun(1000, func() {
		now += 20 * ms // 50 a second against a queue of 20 and a window of 5
		tok, v := c.Enter(now, "", 1)
		if v.Blocked {
			refused++
			return
		}
		passed++
		tok.Exit(now+int64(v.Wait), false)
	})
	if allocs > 0 {
		t.Errorf("Enter+Exit through a throttle and reject rules allocates %v per call", allocs)
	}
	if passed == 0 || refused == 0 {
		t.Errorf("%d passed, %d refused: the test tests less than it says", passed, refused)
	}
}
