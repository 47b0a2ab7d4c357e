package hotparam_test

import (
	"errors"
	"testing"
	"time"

	"sluice/config"
	"sluice/hotparam"
	"sluice/limiter"
)

// Checker.Room: a call some rule refused for 900 ms is told the wait of a
// value that needs longer, counting nothing: a bucket's or a queue's. At
// that wait the value lets it in, a nanosecond sooner it does not; its
// quota goes to the sink with the value as its key. A value not tracked,
// and a retry already longer or unknown, change nothing.
func TestRoomCoversEveryValue(t *testing.T) {
	bucket := seedRule()
	bucket.Items, bucket.Count, bucket.DurationSec = nil, 1, 10
	cases := []struct {
		name string
		rule config.ParamRule
		want time.Duration // after the call at 0.1 s
	}{
		{"a bucket", bucket, 9900 * time.Millisecond},
		{"a queue", throttleRule(0.1, 500), 9400 * time.Millisecond}, // one every 10 s, a 500 ms queue
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, tc.rule).For("get-order")
			tok, v := c.Enter(0, order("7"), 1)
			if v.Blocked {
				t.Fatal("the first call was refused")
			}
			tok.Exit(0, 200)
			now, refused := sec(0.1), int64(900*time.Millisecond)
			var sink quotaLog
			if got := time.Duration(c.Room(now, order("7"), 1, refused, &sink)); got != tc.want {
				t.Fatalf("Room %v, want %v", got, tc.want)
			}
			if len(sink) != 1 || sink[0].Key != "7" || sink[0].Reset != tc.want || sink[0].Kind != limiter.ReasonParam {
				t.Errorf("quotas %+v, want value 7's, reset %v", sink, tc.want)
			}
			if got := c.Room(now, order("8"), 1, refused, nil); got != refused {
				t.Errorf("Room of a value not tracked: %v, want the refusal's", time.Duration(got))
			}
			if got := c.Room(now, order("7"), 1, int64(20*time.Second), nil); got != int64(20*time.Second) {
				t.Errorf("Room of a longer retry: %v, want it kept", time.Duration(got))
			}
			if got := c.Room(now, order("7"), 1, 0, nil); got != 0 {
				t.Errorf("Room of an unknown retry: %v, want it left unknown", time.Duration(got))
			}
			back := now + int64(tc.want)
			if _, v := c.Enter(back-1, order("7"), 1); !v.Blocked {
				t.Errorf("passed 1 ns before Room")
			}
			if _, v := c.Enter(back, order("7"), 1); v.Blocked {
				t.Errorf("refused at Room: %+v", v)
			}
		})
	}
}

// A value an item never lets in (count 0) leaves no moment to tell, tracked
// or not.
func TestRoomOfAValueNeverLetIn(t *testing.T) {
	r := seedRule()
	r.Items = append(r.Items, config.ParamItem{Value: "never", Count: 0})
	c := compile(t, r).For("get-order")
	if got := c.Room(sec(1), order("never"), 1, int64(time.Second), nil); got != -1 {
		t.Errorf("Room: %v, want -1", time.Duration(got))
	}
	if got := c.Room(sec(1), order("7"), 1, int64(time.Second), nil); got != int64(time.Second) {
		t.Errorf("Room of another value: %v, want the refusal's 1s", time.Duration(got))
	}
}

// Room's wait for a spent bucket is exact at every count, durationSec and
// start: a value that spent its whole bucket in one call, read half a
// token's time later, is told when its next token is back; at it the value
// lets a call in, a nanosecond sooner it does not. Swept over counts 1 to
// 1e5, two durations and starts a prime number of ns apart (a bucket has
// no grid).
func TestRoomIsExactProperty(t *testing.T) {
	for _, count := range []float64{1, 2, 3, 10, 100, 1000, 100000} {
		for _, dur := range []int64{1, 10} {
			for start := int64(0); start < sec(1); start += 37_000_003 {
				r := seedRule()
				r.Items, r.Count, r.DurationSec = nil, count, dur
				c := compile(t, r).For("get-order")
				tok, v := c.Enter(start, order("7"), int64(count))
				if v.Blocked {
					t.Fatalf("count %g: the filling call refused: %+v", count, v)
				}
				tok.Exit(start, 200)
				token := int64(float64(sec(float64(dur))) / count) // one token's time
				now := start + token/2
				got := c.Room(now, order("7"), 1, 1, nil)
				// About half a token's time (the bucket's costs are whole ns).
				if got < token/2-2 || got > token-token/2+2 {
					t.Fatalf("count %g dur %d start %d: Room %v, want about %v", count, dur, start, time.Duration(got), time.Duration(token/2))
				}
				if _, v := c.Enter(now+got-1, order("7"), 1); !v.Blocked {
					t.Fatalf("count %g dur %d start %d: let in 1 ns before Room %v", count, dur, start, time.Duration(got))
				}
				if _, v := c.Enter(now+got, order("7"), 1); v.Blocked {
					t.Fatalf("count %g dur %d start %d: refused at Room %v: %+v", count, dur, start, time.Duration(got), v)
				}
			}
		}
	}
}

// A call its rule never lets in (an item of count 0, more tokens than the
// bucket holds) is refused with neither RetryAfter nor a quota: a RateLimit
// t=0 (and X-RateLimit-Reset: 0) told the client to retry at once, and it
// would be refused for ever. A flow rule's such refusal has none either.
func TestNeverLetInHasNoQuota(t *testing.T) {
	down := errors.New("redis down")
	local := seedRule()
	local.Items = append(local.Items, config.ParamItem{Value: "never", Count: 0})
	after := costRule(2, 1)
	after.Items = []config.ParamItem{{Value: "never", Count: 0}}
	cluster := clusterRule(10, config.ThresholdGlobal, nil)
	cluster.Items = []config.ParamItem{{Value: "never", Count: 0}}
	for _, tc := range []struct {
		name  string
		c     *hotparam.Checker
		value string
		n     int64
	}{
		{"an item of count 0", compile(t, local).For("get-order"), "never", 1},
		{"more tokens than the bucket holds", compile(t, local).For("get-order"), "7", 1000},
		{"countOn, an item of count 0", compile(t, after).For("get-order"), "never", 1},
		{"clusterMode, an item of count 0", compileCluster(t, &fakeCluster{ok: true}, cluster), "never", 1},
		{"clusterMode, Redis down, more tokens than the share holds", compileCluster(t, &fakeCluster{err: down, gateways: 2}, clusterRule(10, config.ThresholdGlobal, nil)), "7", 6},
	} {
		_, v := tc.c.Enter(sec(1), order(tc.value), tc.n)
		if !v.Blocked || v.RetryAfter != 0 || v.HasQuota {
			t.Errorf("%s: %+v, want blocked with no RetryAfter and no quota", tc.name, v)
		}
	}
}
