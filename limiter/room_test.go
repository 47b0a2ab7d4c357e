package limiter_test

import (
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter"
)

// Checker.Room: a call some rule refused for 900 ms (the first, 1 a
// second, full since t0) is told the wait of another rule of the checker
// that needs longer, counting nothing; at that wait it passes (a
// throttle's within its queue), a nanosecond sooner it is refused. That
// rule's quota goes to the sink.
func TestRoomCoversEveryRule(t *testing.T) {
	perTen := qps("r", 1)
	perTen.StatIntervalMs = 10000
	cases := []struct {
		name   string
		rules  []config.FlowRule
		origin string
		want   time.Duration // after the refusal at t0+100ms
		rule   int           // the rule that needs longest
	}{
		{"a longer window", []config.FlowRule{qps("r", 1), perTen}, "", 9900 * time.Millisecond, 1},
		// one every 10 s, a 500 ms queue (a throttle is checked first: a
		// later guard's refusal reads it here)
		{"a throttle queue", []config.FlowRule{throttleRule(0.1, 500)}, "", 9400 * time.Millisecond, 0},
		{"a window per other origin", []config.FlowRule{qps("r", 1), app(perTen, "other")}, "x", 9900 * time.Millisecond, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, tc.rules...).Checker("r", "default")
			if !enterAs(c, t0, tc.origin) {
				t.Fatal("the first call was refused")
			}
			now := t0 + 100*ms
			if _, v := c.Enter(now, tc.origin, 1); !v.Blocked {
				t.Fatalf("the second call: %+v, want refused", v)
			}
			refused := int64(900 * time.Millisecond)
			var sink quotaLog
			if got := time.Duration(c.Room(now, tc.origin, 1, refused, &sink)); got != tc.want {
				t.Fatalf("Room %v, want %v", got, tc.want)
			}
			if len(sink) != 1 || sink[0].Rule != tc.rule || sink[0].Reset != tc.want || sink[0].Remaining != 0 {
				t.Errorf("quotas %+v, want rule %d's, reset %v", sink, tc.rule, tc.want)
			}
			if got := time.Duration(c.Room(now, tc.origin, 1, int64(20*time.Second), nil)); got != 20*time.Second {
				t.Errorf("Room of a longer retry: %v, want it kept", got)
			}
			if got := c.Room(now, tc.origin, 1, 0, nil); got != 0 {
				t.Errorf("Room of an unknown retry: %v, want it left unknown", got)
			}
			back := now + int64(tc.want)
			if _, v := c.Enter(back-1, tc.origin, 1); !v.Blocked {
				t.Errorf("passed 1 ns before Room")
			}
			if !enterAs(c, back, tc.origin) {
				t.Errorf("refused at Room")
			}
		})
	}
	// A rule that never holds the call (3 tokens of a rule of 2) leaves no
	// moment to tell.
	never := compile(t, qps("r", 5), qps("r", 2)).Checker("r", "default")
	if got := never.Room(t0, "", 3, int64(900*time.Millisecond), nil); got != -1 {
		t.Errorf("Room of a call a rule never holds: %v, want -1", time.Duration(got))
	}
	// An origin never seen has all its room in an other-origin rule.
	c := compile(t, qps("r", 1), app(perTen, "other")).Checker("r", "default")
	enterAs(c, t0, "x")
	if got := c.Room(t0+100*ms, "y", 1, int64(900*time.Millisecond), nil); got != int64(900*time.Millisecond) {
		t.Errorf("Room for a new origin: %v, want the first rule's 900ms", time.Duration(got))
	}
}

func enterAs(c *limiter.Checker, now int64, origin string) bool {
	tok, v := c.Enter(now, origin, 1)
	if v.Blocked {
		return false
	}
	tok.Exit(now+int64(v.Wait), false)
	return true
}
