package limiter_test

import (
	"testing"
	"time"

	"sluice/config"
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

// A queue that takes more calls than the rule's count (2 a second queued
// up to 3 s) states what is left of the count, never more: r=6 of q=2
// read as a broken policy, and a client that sent 6 at once would have
// waited up to 3 s for them. The queue still takes them.
func TestThrottleQuotaNeverAboveCount(t *testing.T) {
	c := compile(t, throttleRule(2, 3000)).Checker("r", "default")
	for i, want := range []float64{2, 2, 2, 2, 2, 1, 0} {
		_, v := c.Enter(t0, "", 1)
		if v.Blocked || v.Quota.Remaining != want || v.Quota.Limit != 2 {
			t.Errorf("call %d: %+v, want passed with %v of 2 left", i, v, want)
		}
	}
}

// The same over counts 1 to 1e5, queues of one to three intervals and
// start phases: every pass's r is at most q, and the last call the queue
// takes says 0.
func TestThrottleQuotaNeverAboveCountProperty(t *testing.T) {
	for _, count := range []float64{1, 2, 3, 10, 100, 1000, 100000} {
		for _, maxQ := range []int64{1000, 2000, 3000} {
			if count*float64(maxQ)/1000 > 1e5 {
				continue // the queue takes count per second of it: 1e5 calls at most
			}
			for _, phase := range []int64{0, 37 * ms, 499 * ms} {
				c := compile(t, throttleRule(count, maxQ)).Checker("r", "default")
				at, last := t0+phase, -1.0
				for i := 0; ; i++ {
					_, v := c.Enter(at, "", 1)
					if v.Blocked {
						break
					}
					if v.Quota.Remaining > count || v.Quota.Limit != count {
						t.Fatalf("count %g queue %d ms phase %v, call %d: r=%v of q=%v", count, maxQ, time.Duration(phase), i, v.Quota.Remaining, v.Quota.Limit)
					}
					last = v.Quota.Remaining
				}
				if last != 0 {
					t.Errorf("count %g queue %d ms phase %v: the last call the queue took said r=%v, want 0", count, maxQ, time.Duration(phase), last)
				}
			}
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
	// One in 200 ms: the 100 ms slot a queued call would take still
	// holds the first call's pass.
	oneIn200ms := qps("r", 1)
	oneIn200ms.LimitApp = "a"
	oneIn200ms.StatIntervalMs = 200
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
				t.Fatalf("call %d: passed, want blocked by the 1-per-200ms rule", i)
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
		{"blocked by a later rule", []config.FlowRule{perApp("default"), perApp("a"), oneIn200ms}, blockedLater, t0 + 250*ms, 0},
		{"client left, sixth rule", []config.FlowRule{roomy, roomy, roomy, perApp("default"), roomy, perApp("a")}, queuedThenLeft, t0 + 2*ms, 98 * time.Millisecond},
		{"blocked, sixth rule", []config.FlowRule{roomy, roomy, roomy, roomy, perApp("default"), perApp("a"), oneIn200ms}, blockedLater, t0 + 250*ms, 0},
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
