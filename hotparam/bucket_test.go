package hotparam_test

import (
	"strings"
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter"
)

// burst is calls calls of n tokens for one value at one instant, of which
// pass must pass.
type burst struct {
	at    int64
	value string // "" = the request lacks the parameter
	n     int64
	calls int
	pass  int
}

func TestQPSRejectPerValue(t *testing.T) {
	withBurst := seedRule()
	withBurst.Items, withBurst.BurstCount = nil, 3
	slow := seedRule()
	slow.Items, slow.Count, slow.DurationSec = nil, 10, 5
	zero := seedRule()
	zero.Items = []config.ParamItem{{Value: "banned", Count: 0}}
	fraction := seedRule()
	fraction.Items, fraction.Count = nil, 0.5
	tiny := seedRule()
	tiny.Items, tiny.Count = nil, 1e-15
	// Values past 64 bytes are tracked by digest; items still match them exactly.
	long := strings.Repeat("x", 100)
	longItem := seedRule()
	longItem.Items = []config.ParamItem{{Value: long + "1", Count: 4}}

	tests := []struct {
		name  string
		rule  config.ParamRule
		steps []burst
	}{
		{"seed: each order id on its own, items get their own count", seedRule(), []burst{
			{at: 0, value: "1", calls: 20, pass: 2},
			{at: 0, value: "102", calls: 20, pass: 4},
			{at: 0, value: "103", calls: 20, pass: 10},
			{at: 0, value: "7", calls: 20, pass: 2},
			{at: sec(0.5), value: "1", calls: 20, pass: 1},
			{at: sec(0.5), value: "103", calls: 20, pass: 5},
			{at: sec(1.5), value: "1", calls: 20, pass: 2},
			{at: sec(1.5), value: "102", calls: 20, pass: 4},
			{at: sec(1.5), value: "7", calls: 20, pass: 2},
		}},
		{"items match the exact string", seedRule(), []burst{
			{at: 0, value: "1020", calls: 20, pass: 2},
			{at: 0, value: " 102", calls: 20, pass: 2},
		}},
		{"burstCount adds to the bucket, not to the rate", withBurst, []burst{
			{at: 0, value: "1", calls: 20, pass: 5},
			{at: sec(1), value: "1", calls: 20, pass: 2},
			{at: sec(2.5), value: "1", calls: 20, pass: 3},
			{at: sec(100), value: "1", calls: 20, pass: 5},
		}},
		{"durationSec 5: count 10 per five seconds", slow, []burst{
			{at: 0, value: "1", calls: 20, pass: 10},
			{at: sec(1), value: "1", calls: 20, pass: 2},
			{at: sec(4), value: "1", calls: 20, pass: 6},
			{at: sec(9), value: "1", calls: 20, pass: 10},
		}},
		{"n tokens per call", seedRule(), []burst{
			{at: 0, value: "103", n: 4, calls: 5, pass: 2},
			{at: 0, value: "103", n: 2, calls: 5, pass: 1},
			{at: 0, value: "1", n: 3, calls: 5, pass: 0}, // more than the bucket holds
		}},
		{"fractional count: one call per two seconds", fraction, []burst{
			{at: 0, value: "1", calls: 5, pass: 1},
			{at: sec(1.9), value: "1", calls: 5, pass: 0},
			{at: sec(2), value: "1", calls: 5, pass: 1},
		}},
		{"a tiny count neither overflows nor passes twice", tiny, []burst{
			{at: 0, value: "1", calls: 5, pass: 1},
			{at: sec(1e6), value: "1", calls: 5, pass: 0},
		}},
		{"item with count 0 blocks that value only", zero, []burst{
			{at: 0, value: "banned", calls: 5, pass: 0},
			{at: 0, value: "1", calls: 5, pass: 2},
		}},
		{"long values are limited each on its own", longItem, []burst{
			{at: 0, value: long + "0", calls: 20, pass: 2},
			{at: 0, value: long + "1", calls: 20, pass: 4},
			{at: 0, value: long + "2", calls: 20, pass: 2},
			{at: 0, value: "0" + long, calls: 20, pass: 2},
			{at: 0, value: long + "0", calls: 20, pass: 0},
			{at: sec(1), value: long + "0", calls: 20, pass: 2},
		}},
		{"a request without the parameter is not limited", seedRule(), []burst{
			{at: 0, value: "", calls: 1000, pass: 1000},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, tc.rule).For("get-order")
			for i, st := range tc.steps {
				n := st.n
				if n == 0 {
					n = 1
				}
				passed := 0
				for range st.calls {
					tok, v := c.Enter(st.at, order(st.value), n)
					if !v.Blocked {
						passed++
						tok.Exit(st.at, 200)
					} else if v.Reason != limiter.ReasonParam {
						t.Fatalf("step %d: reason %v, want param", i, v.Reason)
					}
				}
				if passed != st.pass {
					t.Errorf("step %d (t=%v, value %q): %d of %d passed, want %d",
						i, time.Duration(st.at), st.value, passed, st.calls, st.pass)
				}
			}
		})
	}
}

func TestQPSRejectRetryAfterAndQuota(t *testing.T) {
	c := compile(t, seedRule()).For("get-order")
	_, v := c.Enter(0, order("1"), 1)
	if v.Blocked || !v.HasQuota || v.Quota.Limit != 2 || v.Quota.Remaining != 1 || v.Quota.Window != time.Second {
		t.Fatalf("first call: %+v", v)
	}
	_, v = c.Enter(0, order("1"), 1)
	if v.Blocked || v.Quota.Remaining != 0 || v.Quota.Reset != 500*time.Millisecond {
		t.Fatalf("second call: %+v", v)
	}
	_, v = c.Enter(sec(0.1), order("1"), 1)
	if !v.Blocked || v.Reason != limiter.ReasonParam || v.RetryAfter != 400*time.Millisecond {
		t.Fatalf("third call: blocked=%v reason=%v retryAfter=%v, want param block retry 400ms", v.Blocked, v.Reason, v.RetryAfter)
	}
	if _, v = c.Enter(sec(0.1)+v.RetryAfter.Nanoseconds(), order("1"), 1); v.Blocked {
		t.Fatal("a retry at RetryAfter was blocked")
	}
	// n tokens: RetryAfter is until all n are there.
	_, v = c.Enter(sec(0.5), order("102"), 4)
	if v.Blocked {
		t.Fatal("4 tokens of a full bucket of 4 were blocked")
	}
	if _, v = c.Enter(sec(0.5), order("102"), 3); !v.Blocked || v.RetryAfter != 750*time.Millisecond {
		t.Fatalf("3 tokens of an empty bucket refilling 4/s: %+v, want retry 750ms", v)
	}
}

// RateLimit headers show count per window as the quota (q); burstCount lets
// a full bucket pass more at once, but the remaining shown (r) never exceeds
// q, so a client pacing itself by r is not promised more than the policy.
func TestQuotaRemainingNeverExceedsLimit(t *testing.T) {
	withBurst := seedRule()
	withBurst.Items, withBurst.BurstCount = nil, 3
	itemBurst := withBurst
	itemBurst.Items = []config.ParamItem{{Value: "1", Count: 4}}
	halfBurst := withBurst
	halfBurst.Count = 0.5 // shown as q=1;w=2
	tests := []struct {
		name string
		rule config.ParamRule
		want []float64 // remaining after each call at one instant; -1 = blocked
	}{
		{"count 2", seedRule(), []float64{1, 0, -1}},
		{"count 2, burst 3", withBurst, []float64{2, 2, 2, 1, 0, -1}},
		{"item count 4, burst 3", itemBurst, []float64{4, 4, 4, 3, 2, 1, 0, -1}},
		{"count 0.5, burst 3", halfBurst, []float64{1, 1, 0, -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, tc.rule).For("get-order")
			for i, want := range tc.want {
				_, v := c.Enter(0, order("1"), 1)
				if v.Blocked != (want < 0) {
					t.Fatalf("call %d: blocked=%v, want %v", i, v.Blocked, want < 0)
				}
				if want < 0 {
					continue
				}
				if v.Quota.Remaining != want {
					t.Errorf("call %d: remaining %v of limit %v, want %v", i, v.Quota.Remaining, v.Quota.Limit, want)
				}
			}
		})
	}
}

func TestDryRunCountsButPasses(t *testing.T) {
	r := seedRule()
	r.DryRun, r.Items, r.Count = true, nil, 1
	c := compile(t, r).For("get-order")
	wantDry := []int{0, 1, 1}
	for i, want := range wantDry {
		tok, v := c.Enter(0, order("1"), 1)
		if v.Blocked || v.DryRun != want {
			t.Errorf("call %d: blocked=%v dryRun=%d, want pass with dryRun=%d", i, v.Blocked, v.DryRun, want)
		}
		tok.Exit(0, 200)
	}
}

func TestQPSCancelGivesTokensBackExitDoesNot(t *testing.T) {
	r := seedRule()
	r.Items, r.Count = nil, 1
	c := compile(t, r).For("get-order")
	tok, _ := c.Enter(0, order("1"), 1)
	tok.Cancel(sec(0.2))
	tok.Cancel(sec(0.2)) // a second end gives nothing more back
	tok, v := c.Enter(sec(0.2), order("1"), 1)
	if v.Blocked {
		t.Fatal("a cancelled call's token was not given back")
	}
	tok.Exit(sec(0.2), 200)
	if _, v = c.Enter(sec(0.2), order("1"), 1); !v.Blocked {
		t.Fatal("an exited call's token came back")
	}
	// Giving back never fills a bucket past full.
	tok, _ = c.Enter(sec(10), order("2"), 1)
	tok.Cancel(sec(20))
	passed := 0
	for range 5 {
		if _, v := c.Enter(sec(20), order("2"), 1); !v.Blocked {
			passed++
		}
	}
	if passed != 1 {
		t.Fatalf("after a late Cancel %d passed at once, want the bucket's 1", passed)
	}
}

// A clock that steps back (callers on other cores read it a moment earlier)
// neither refills a bucket nor lets a queue pass early.
func TestClockGoingBackwards(t *testing.T) {
	c := compile(t, seedRule()).For("get-order")
	for range 2 {
		c.Enter(sec(1), order("1"), 1)
	}
	if _, v := c.Enter(sec(0.5), order("1"), 1); !v.Blocked || v.RetryAfter != time.Second {
		t.Errorf("bucket, 0.5s back: %+v, want blocked until 1.5s (retry 1s)", v)
	}
	if _, v := c.Enter(sec(1.5), order("1"), 1); v.Blocked {
		t.Error("bucket: blocked once the clock caught up")
	}

	q := compile(t, throttleRule(10, 150)).For("get-order")
	q.Enter(sec(1), order("1"), 1)
	if _, v := q.Enter(sec(0.95), order("1"), 1); v.Blocked || v.Wait != 150*time.Millisecond {
		t.Errorf("queue, 50ms back: %+v, want a wait of 150ms", v)
	}
	if _, v := q.Enter(sec(0.9), order("1"), 1); !v.Blocked {
		t.Error("queue: a call 100ms back passed a full queue")
	}
}
