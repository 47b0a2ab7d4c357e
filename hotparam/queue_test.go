package hotparam_test

import (
	"testing"
	"time"

	"sluice/config"
	"sluice/hotparam"
	"sluice/internal/throttle/throttletest"
)

func throttleRule(count float64, maxQueueMs int64) config.ParamRule {
	r := seedRule()
	r.Items, r.Count = nil, count
	r.ControlBehavior, r.MaxQueueingTimeMs = config.BehaviorThrottle, maxQueueMs
	return r
}

// Sentinel Java and sentinel-golang compute the throttle spacing as
// round(1000/count) whole milliseconds, which is 0 above 2000 QPS (and 1ms, so
// 1000 QPS, at 1250): the queue then lets everything through.
// Offer twice the limit for one second, one value, no queueing: exactly the
// limit must pass.
func TestThrottleSubMillisecondSpacingNotRoundedToMilliseconds(t *testing.T) {
	for _, qps := range []int64{1250, 5000, 50000, 100000} {
		t.Run(time.Duration(int64(time.Second)/qps).String(), func(t *testing.T) {
			c := compile(t, throttleRule(float64(qps), 0)).For("get-order")
			step := int64(time.Second) / qps / 2
			passed := int64(0)
			for now := int64(0); now < int64(time.Second); now += step {
				tok, v := c.Enter(now, order("1"), 1)
				if !v.Blocked {
					passed++
					tok.Exit(now, 200)
				}
			}
			if passed != qps {
				t.Errorf("offered %d calls in one second to one value limited to %d QPS: %d passed", 2*qps, qps, passed)
			}
			// Another value has its own queue.
			if _, v := c.Enter(int64(time.Second)-step, order("2"), 1); v.Blocked {
				t.Error("a fresh value was blocked by another value's queue")
			}
		})
	}
}

func TestThrottleQueueWaits(t *testing.T) {
	tests := []struct {
		name       string
		qps        float64
		maxQueueMs int64
		n          int64
		want       []time.Duration // wait per call at t=0; -1 = blocked
	}{
		{"5000 QPS, 1ms queue", 5000, 1, 1, []time.Duration{0, 200 * time.Microsecond, 400 * time.Microsecond,
			600 * time.Microsecond, 800 * time.Microsecond, time.Millisecond, -1, -1}},
		{"50,000 QPS, 100µs queue", 50000, 0, 1, []time.Duration{0, -1}},
		// The spacing is rounded to the nanosecond: 3 QPS is 333,333,333ns apart.
		{"3 QPS spacing 333.33ms", 3, 1000, 1, []time.Duration{0, 333333333, 666666666, 999999999, -1}},
		{"n=5 at 5 QPS waits a second", 5, 2000, 5, []time.Duration{0, time.Second, 2 * time.Second, -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, throttleRule(tc.qps, tc.maxQueueMs)).For("get-order")
			for i, want := range tc.want {
				_, v := c.Enter(0, order("1"), tc.n)
				got := v.Wait
				if v.Blocked {
					got = -1
				}
				if got != want {
					t.Errorf("call %d: wait %v, want %v (-1 = blocked)", i, got, want)
				}
			}
		})
	}
}

func TestThrottleCancelLeavesQueue(t *testing.T) {
	c := compile(t, throttleRule(10, 500)).For("get-order")
	c.Enter(0, order("1"), 1)           // goes now
	tok, v := c.Enter(0, order("1"), 1) // waits 100ms
	if v.Wait != 100*time.Millisecond {
		t.Fatalf("wait %v, want 100ms", v.Wait)
	}
	tok.Cancel(sec(0.01)) // the client left while queued
	if _, v = c.Enter(sec(0.01), order("1"), 1); v.Wait != 90*time.Millisecond {
		t.Errorf("after the queued call left, the next waits %v, want 90ms (its slot)", v.Wait)
	}
}

// Eviction of a throttled value: one with a call queued stays; one whose
// queue is empty may go and comes back with an empty queue, like a new value.
func TestThrottleEvictionKeepsQueuedValues(t *testing.T) {
	r := throttleRule(10, 500) // one call per 100ms
	r.MaxTrackedValues = 2
	c := compile(t, r).For("get-order")
	c.Enter(0, order("a"), 1)
	c.Enter(0, order("a"), 1) // queued until 100ms
	c.Enter(0, order("b"), 1)
	if _, v := c.Enter(sec(0.05), order("c"), 1); v.Blocked || v.Wait != 0 {
		t.Fatalf("value c: %+v, want it tracked in place of b (queue empty)", v)
	}
	if _, v := c.Enter(sec(0.05), order("b"), 1); v.Blocked {
		t.Fatal("value b: blocked")
	}
	if _, v := c.Enter(sec(0.05), order("a"), 1); v.Blocked || v.Wait != 150*time.Millisecond {
		t.Errorf("value a: %+v, want its queue kept (wait 150ms)", v)
	}
}

// A call that leaves the queue while later calls are queued behind it gives
// its slot back (the tail cannot move back past them): the next call takes
// that slot, so the queue keeps its spacing and its capacity. Before, the
// slot stayed empty and a full queue refused the call.
func TestThrottleCancelInsideQueueGivesSlotBack(t *testing.T) {
	c := compile(t, throttleRule(10, 500)).For("get-order") // 100ms apart, 500ms queue
	var toks []hotparam.Token
	for i := range 6 { // slots at 0, 100, ..., 500ms: the queue is full
		tok, v := c.Enter(0, order("1"), 1)
		if v.Blocked || v.Wait != time.Duration(i)*100*time.Millisecond {
			t.Fatalf("call %d: blocked %v wait %v, want %v", i, v.Blocked, v.Wait, time.Duration(i)*100*time.Millisecond)
		}
		toks = append(toks, tok)
	}
	if _, v := c.Enter(0, order("1"), 1); !v.Blocked {
		t.Fatal("a call passed a full queue")
	}
	toks[2].Cancel(sec(0.01)) // its client left; calls at 300..500ms are behind it
	tok, v := c.Enter(sec(0.02), order("1"), 1)
	if v.Blocked || v.Wait != 180*time.Millisecond {
		t.Fatalf("after a slot inside the queue was given back: blocked %v wait %v, want its slot (wait 180ms)", v.Blocked, v.Wait)
	}
	if _, v := c.Enter(sec(0.02), order("1"), 1); !v.Blocked {
		t.Errorf("a second call passed: the given-back slot counted twice (wait %v)", v.Wait)
	}
	// Exit does not give a slot back: a forwarded call used it.
	tok.Exit(sec(0.2), 200)
	toks[3].Exit(sec(0.3), 200)
	if _, v := c.Enter(sec(0.3), order("1"), 1); v.Blocked || v.Wait != 300*time.Millisecond {
		t.Errorf("at 300ms: blocked %v wait %v, want the tail (600ms, wait 300ms)", v.Blocked, v.Wait)
	}
}

// Clients less patient than the queue: the slots they give back inside one
// value's queue are reused, so the value keeps being forwarded count a
// second. Before, the queue filled with empty slots and forwarded nothing
// after the first second.
func TestThrottleImpatientClientsStillForwarded(t *testing.T) {
	c := compile(t, throttleRule(10, 5000)).For("get-order")
	throttletest.ImpatientClientsStillForwarded(t, 0, func(now int64) (time.Duration, func(int64, bool), bool) {
		tok, v := c.Enter(now, order("1"), 1)
		return v.Wait, func(at int64, forwarded bool) {
			if forwarded {
				tok.Exit(at, 200)
			} else {
				tok.Cancel(at)
			}
		}, !v.Blocked
	})
}
