package hotparam_test

import (
	"testing"
	"time"

	"sluice/config"
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
