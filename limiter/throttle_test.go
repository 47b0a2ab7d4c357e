package limiter_test

import (
	"fmt"
	"testing"
	"time"

	"sluice/config"
	"sluice/internal/passcheck"
	"sluice/limiter"
)

func throttleRule(count float64, maxQueueMs int64) config.FlowRule {
	r := qps("r", count)
	r.ControlBehavior = config.BehaviorThrottle
	r.MaxQueueingTimeMs = maxQueueMs
	return r
}

// Java Sentinel's throttle computes its spacing in whole milliseconds, so from
// about 1000 QPS on it stops limiting. Here the spacing is in nanoseconds: at
// 2x the offered load, pacing (maxQueueingTimeMs 0) passes exactly count per
// second, evenly spaced, and a queue forwards calls exactly one spacing apart.
func TestThrottleExactAbove1000QPS(t *testing.T) {
	for _, count := range []float64{0.1, 10, 1000, 5000, 100000} {
		spacing := int64(float64(sec) / count)
		dur := 20 * sec
		switch {
		case count < 1:
			dur = 200 * sec
		case count >= 1000:
			dur = 2 * sec
		}
		// pacing, no queue
		c := compile(t, throttleRule(count, 0)).Checker("r", "default")
		passes := drive(c, t0, dur, 2*count, "", 1)
		if want := int(count * float64(dur/sec)); len(passes) != want {
			t.Errorf("%v QPS pacing: passed %d in %d s, want %d", count, len(passes), dur/sec, want)
		}
		for i := 1; i < len(passes); i++ {
			if d := passes[i] - passes[i-1]; d != spacing {
				t.Fatalf("%v QPS pacing: passes %d ns apart, want %d", count, d, spacing)
			}
		}
		// a queue of 1 s: every call within it goes, each one spacing later
		c = compile(t, throttleRule(count, 1000)).Checker("r", "default")
		var fwd []int64
		for i := range int(2 * count) {
			now := t0 + int64(i)*int64(float64(sec)/(4*count))
			tok, v := c.Enter(now, "", 1)
			if v.Blocked {
				if int64(v.RetryAfter) <= 0 {
					t.Errorf("%v QPS: blocked with RetryAfter %v", count, v.RetryAfter)
				}
				continue
			}
			fwd = append(fwd, now+int64(v.Wait))
			tok.Exit(now, false)
		}
		for i := 1; i < len(fwd); i++ {
			if d := fwd[i] - fwd[i-1]; d != spacing {
				t.Fatalf("%v QPS queue: forwarded %d ns apart, want %d", count, d, spacing)
			}
		}
		if count >= 10 && len(fwd) < int(count) {
			t.Errorf("%v QPS queue: forwarded %d, want at least %v", count, len(fwd), count)
		}
	}
}

// A call that would wait longer than maxQueueingTimeMs is blocked, and told
// when it would fit; acquireCount scales the spacing.
func TestThrottleQueueBound(t *testing.T) {
	c := compile(t, throttleRule(10, 250)).Checker("r", "default") // 100 ms apart
	steps := []struct {
		n       int64
		wait    time.Duration
		blocked bool
		retry   time.Duration
	}{
		{1, 0, false, 0},
		{1, 100 * time.Millisecond, false, 0},
		{1, 200 * time.Millisecond, false, 0},
		{1, 0, true, 50 * time.Millisecond},
		{2, 0, true, 150 * time.Millisecond},
	}
	for i, s := range steps {
		_, v := c.Enter(t0, "", s.n)
		if v.Blocked != s.blocked || v.Wait != s.wait || v.RetryAfter != s.retry {
			t.Errorf("step %d: %+v, want blocked %v wait %v retry %v", i, v, s.blocked, s.wait, s.retry)
		}
	}
}

// A queued call whose client leaves gives its slot back to the next caller.
func TestThrottleCancelLeavesQueue(t *testing.T) {
	c := compile(t, throttleRule(10, 1000)).Checker("r", "default")
	c.Enter(t0, "", 1)
	tok, v := c.Enter(t0, "", 1)
	if v.Wait != 100*time.Millisecond {
		t.Fatalf("second call waits %v", v.Wait)
	}
	tok.Cancel(t0+10*ms, limiter.ReasonNone)
	if _, v := c.Enter(t0+10*ms, "", 1); v.Wait != 90*time.Millisecond {
		t.Errorf("after the cancel the next call waits %v, want 90ms", v.Wait)
	}
}

// A throttle rule's Quota: the calls the queue still takes now, and the spacing.
func TestThrottleQuota(t *testing.T) {
	c := compile(t, throttleRule(10, 250)).Checker("r", "default")
	for i, want := range []float64{2, 1, 0} {
		_, v := c.Enter(t0, "", 1)
		if !v.HasQuota || v.Quota.Remaining != want || v.Quota.Reset != 100*time.Millisecond || v.Quota.Limit != 10 || v.Quota.Window != time.Second {
			t.Errorf("call %d: %+v, want remaining %v", i, v.Quota, want)
		}
	}
}

// With a default and a per-origin throttle rule, a call that does not go
// after all (its client left the queue, or a later rule blocked it) gives its
// slot back to both queues, also when the second throttle rule comes after
// the rules a Token holds inline. Before, only the first queue got it back,
// and every such call pushed later calls of the origin one spacing further.
func TestThrottleEveryQueueGetsItsSlotBack(t *testing.T) {
	perApp := func(app string) config.FlowRule { // 100 ms apart, queue 1 s
		r := throttleRule(10, 1000)
		r.LimitApp = app
		return r
	}
	oneIn100ms := qps("r", 1)
	oneIn100ms.LimitApp = "a"
	oneIn100ms.StatIntervalMs = 100
	roomy := qps("r", 1e6)
	queuedThenLeft := func(t *testing.T, c *limiter.Checker) {
		tok, v := c.Enter(t0, "a", 1)
		if v.Blocked || v.Wait != 100*time.Millisecond {
			t.Fatalf("second call: %+v, want queued 100ms", v)
		}
		tok.Cancel(t0+ms, limiter.ReasonNone)
	}
	blockedLater := func(t *testing.T, c *limiter.Checker) {
		for i := int64(1); i <= 5; i++ {
			if _, v := c.Enter(t0+i*ms, "a", 1); !v.Blocked {
				t.Fatalf("call %d: passed, want blocked by the 1-per-100ms rule", i)
			}
		}
	}
	tests := []struct {
		name  string
		rules []config.FlowRule
		leave func(*testing.T, *limiter.Checker) // after one call of origin a passed at t0
		at    int64
		wait  time.Duration // of the next call of origin a, at at
	}{
		{"client left", []config.FlowRule{perApp("default"), perApp("a")}, queuedThenLeft, t0 + 2*ms, 98 * time.Millisecond},
		{"blocked by a later rule", []config.FlowRule{perApp("default"), perApp("a"), oneIn100ms}, blockedLater, t0 + 150*ms, 0},
		{"client left, sixth rule", []config.FlowRule{roomy, roomy, roomy, perApp("default"), roomy, perApp("a")}, queuedThenLeft, t0 + 2*ms, 98 * time.Millisecond},
		{"blocked, sixth rule", []config.FlowRule{roomy, roomy, roomy, roomy, perApp("default"), perApp("a"), oneIn100ms}, blockedLater, t0 + 150*ms, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compile(t, tt.rules...).Checker("r", "default")
			tok, v := c.Enter(t0, "a", 1)
			if v.Blocked || v.Wait != 0 {
				t.Fatalf("first call: %+v", v)
			}
			tok.Exit(t0, false)
			tt.leave(t, c)
			if _, v := c.Enter(tt.at, "a", 1); v.Blocked || v.Wait != tt.wait {
				t.Errorf("next call: blocked %v, wait %v, want wait %v", v.Blocked, v.Wait, tt.wait)
			}
		})
	}
}

// A call under two throttle rules (count 10 for all callers, count 5 for
// origin a) waits for the later of its two slots, and in the other queue
// it takes the slot of that moment, not an earlier one: the earlier slot
// it first took is given back, a hole the next caller takes. Before, it
// kept the 100 ms slot of the all-callers queue while waiting 200 ms, so
// it was forwarded together with the call that took the 200 ms slot there,
// and a real second passed 11 calls through the count-10 rule.
func TestThrottleSeveralRulesCallTakesSlotsOfOneMoment(t *testing.T) {
	all := throttleRule(10, 2000)
	perA := throttleRule(5, 2000)
	perA.LimitApp = "a"
	c := compile(t, all, perA).Checker("r", "default")
	steps := []struct {
		origin string
		wait   time.Duration
	}{
		{"a", 0},                      // slots 0 / 0
		{"a", 200 * time.Millisecond}, // 200 ms in both queues; 100 ms is a hole
		{"b", 100 * time.Millisecond}, // the hole
		{"b", 300 * time.Millisecond},
		{"b", 400 * time.Millisecond},
		{"a", 500 * time.Millisecond}, // 400 ms in a's queue, 500 ms in all
		{"b", 600 * time.Millisecond},
	}
	for i, st := range steps {
		tok, v := c.Enter(t0, st.origin, 1)
		if v.Blocked || v.Wait != st.wait {
			t.Fatalf("call %d from %q: blocked %v, wait %v, want %v", i, st.origin, v.Blocked, v.Wait, st.wait)
		}
		tok.Exit(t0, false)
	}
}

// Property: whatever mix of callers, calls under several throttle rules
// keep every rule's bound: the calls a rule applies to are forwarded at
// least its spacing apart (no burstCount) and no real interval forwards
// more than count + burstCount of them. Swept over pairs of counts (the
// rule for all callers and the one for origin a; queues of 2 s), a
// burstCount on the all-callers rule, loads of 1.5x and 3x the all-callers
// count with every second, third or fifth call from a, and start phases;
// forward times are enter + wait.
func TestThrottleSeveralRulesKeepEachBound(t *testing.T) {
	for _, counts := range [][2]float64{{10, 5}, {10, 3}, {7, 5}, {10, 10}, {100, 30}} {
		for _, burst := range []int64{0, 3} {
			t.Run(fmt.Sprintf("all=%g/a=%g/burst=%d", counts[0], counts[1], burst), func(t *testing.T) {
				t.Parallel()
				all := burstRule(counts[0], 1000, burst, 2000)
				perA := throttleRule(counts[1], 2000)
				perA.LimitApp = "a"
				for _, over := range []float64{1.5, 3} {
					for _, every := range []int{2, 3, 5} {
						for ph := int64(0); ph < sec; ph += 4 * sweepStep {
							c := compile(t, all, perA).Checker("r", "default")
							start := t0 - t0%sec + ph
							var fwdAll, fwdA []int64
							step := float64(sec) / (over * counts[0])
							for i := 0; i < int(6*over*counts[0]); i++ {
								now := start + int64(float64(i)*step)
								origin := "b"
								if i%every == 0 {
									origin = "a"
								}
								tok, v := c.Enter(now, origin, 1)
								if v.Blocked {
									continue
								}
								tok.Exit(now, false)
								f := now + int64(v.Wait)
								fwdAll = append(fwdAll, f)
								if origin == "a" {
									fwdA = append(fwdA, f)
								}
							}
							what := fmt.Sprintf("%gx, one call in %d from a, phase %d ms", over, every, ph/ms)
							checkThrottleBound(t, what+": all callers", fwdAll, counts[0], burst)
							checkThrottleBound(t, what+": origin a", fwdA, counts[1], 0)
						}
					}
				}
			})
		}
	}
}

// checkThrottleBound: forward times fwd of a throttle rule of count a
// second with burst stored permits keep its bound.
func checkThrottleBound(t *testing.T, what string, fwd []int64, count float64, burst int64) {
	t.Helper()
	sortInt64(fwd)
	if got := passcheck.MostInInterval(fwd, sec); got > int(count)+int(burst) {
		t.Fatalf("%s: a real second forwarded %d, want <= %d", what, got, int(count)+int(burst))
	}
	if burst > 0 {
		return
	}
	s := spacingOf(count, sec)
	for i := 1; i < len(fwd); i++ {
		if d := fwd[i] - fwd[i-1]; d < s {
			t.Fatalf("%s: forwarded %d ns apart, want >= the spacing %d", what, d, s)
		}
	}
}
