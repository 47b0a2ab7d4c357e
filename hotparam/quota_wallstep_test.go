package hotparam_test

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestFallbackQuotaAfterTheWallClockStepsForward: while Redis is down a
// calendar quota counts locally, in a bucket that ends on the monotonic
// clock, while its reset (and a block's Retry-After) comes from the wall
// clock periods are read from. After the wall clock stepped forward an
// hour, a client told to come back in an hour was refused again then, and
// told to wait a day: the period had turned on the wall clock, not the
// bucket. Now a reset that ends over half a period after the bucket starts
// the bucket afresh, and a wall clock that stays put or steps back never
// does. Swept over the step: forward within the day (the client waits its
// Retry-After and passes), forward past midnight (a new day at once), and
// back (still refused until the bucket's own end). A step forward that
// lands past the next day's middle reads as a step back (not swept).
func TestFallbackQuotaAfterTheWallClockStepsForward(t *testing.T) {
	const left = 2 * time.Hour // the share is spent at 22:00
	for _, step := range []time.Duration{time.Minute, time.Hour, 110 * time.Minute, 3 * time.Hour, 10 * time.Hour, -time.Hour, -6 * time.Hour} {
		t.Run(fmt.Sprint("step ", step), func(t *testing.T) {
			svc := &fakeCluster{err: errors.New("redis down"), gateways: 2, period: 24 * time.Hour}
			c := compileCluster(t, svc, quotaRule(6)) // a share of 3 here
			now := sec(10)
			svc.reset = left
			if got := clusterPasses(c, now, "7", 5); got != 3 {
				t.Fatalf("%d of 5 passed a share of 3", got)
			}
			// The wall clock steps; no time goes by.
			reset := left - step
			if reset <= 0 {
				reset += 24 * time.Hour // past midnight: the next day
			}
			svc.reset = reset
			_, v := c.Enter(now, order("7"), 1)
			if reset > left+12*time.Hour-time.Minute && step > 0 {
				if v.Blocked {
					t.Fatalf("a step past midnight, a new day: refused for %v", v.RetryAfter)
				}
				return
			}
			if !v.Blocked || v.RetryAfter != reset {
				t.Fatalf("after the step: blocked %v, Retry-After %v; want blocked for the %v left", v.Blocked, v.RetryAfter, reset)
			}
			// Halfway to the reset (or, after a step back, to the
			// bucket's own end), still the same day: still refused.
			half := min(reset, left) / 2
			svc.reset = reset - half
			if _, v := c.Enter(now+int64(half), order("7"), 1); !v.Blocked {
				t.Fatal("passed before the reset, the share spent")
			}
			if step < 0 {
				return // the bucket ends at its own end, before the wall's reset
			}
			// The client comes back after its Retry-After: midnight on the
			// wall clock, a new day of 24 hours.
			svc.reset = 24 * time.Hour
			if _, v := c.Enter(now+int64(reset), order("7"), 1); v.Blocked {
				t.Errorf("refused after waiting the Retry-After it was given (%v), now told %v", reset, v.RetryAfter)
			}
		})
	}
}
