package hotparam_test

import (
	"errors"
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
// the bucket afresh, and a wall clock that stays put never does.
func TestFallbackQuotaAfterTheWallClockStepsForward(t *testing.T) {
	svc := &fakeCluster{err: errors.New("redis down"), gateways: 2, period: 24 * time.Hour}
	c := compileCluster(t, svc, quotaRule(6)) // a share of 3 here
	now := sec(10)
	svc.reset = 2 * time.Hour // 22:00
	if got := clusterPasses(c, now, "7", 5); got != 3 {
		t.Fatalf("%d of 5 passed a share of 3", got)
	}
	// The wall clock steps forward an hour: 23:00, and no time went by.
	svc.reset = time.Hour
	_, v := c.Enter(now, order("7"), 1)
	if !v.Blocked || v.RetryAfter != time.Hour {
		t.Fatalf("after the step: blocked %v, Retry-After %v; want blocked for the hour left", v.Blocked, v.RetryAfter)
	}
	// Half an hour later, still the same day: still refused.
	svc.reset = 30 * time.Minute
	if _, v := c.Enter(now+int64(30*time.Minute), order("7"), 1); !v.Blocked {
		t.Fatal("passed half an hour before the reset, the share spent")
	}
	// The client comes back after its Retry-After: midnight on the wall
	// clock, a new day of 24 hours.
	svc.reset = 24 * time.Hour
	if _, v := c.Enter(now+int64(time.Hour), order("7"), 1); v.Blocked {
		t.Errorf("refused after waiting the Retry-After it was given, now told %v", v.RetryAfter)
	}
}
