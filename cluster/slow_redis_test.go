package cluster_test

import (
	"testing"
	"time"

	"sluice/cluster"
	"sluice/config"
)

// TestSlowRedisIsPickedUpAgain: once the gateway stopped asking a failing
// Redis, its probes dial anew, and a new connection's HELLO costs a round
// trip of its own. With Redis answering in 12 ms under a 20 ms timeout,
// every probe took two round trips and failed, so cluster limiting never
// resumed while calls on a pooled connection would have been in time (an
// audit: 16 to 22 s, until the delay went). A probe now makes its
// connection within the dial's allowance and is judged by its script.
func TestSlowRedisIsPickedUpAgain(t *testing.T) {
	srv := startPrivateRedis(t)
	px := startCutProxy(t, srv)
	var states stateLog
	s := newService(t, cluster.Options{URL: px.url(), Namespace: namespace(t), Timeout: 20 * time.Millisecond,
		Heartbeat: 100 * time.Millisecond, OnState: states.on})
	rule := qpsRule(1000, config.ThresholdGlobal)
	waitFor(t, 5*time.Second, "redis reachable", func() bool { return states.ups.Load() == 1 })
	if ok, err := s.Acquire(rule, "", 1); !ok || err != nil {
		t.Fatalf("redis up: Acquire = %v, %v", ok, err)
	}

	px.cut(true)
	waitFor(t, 5*time.Second, "the gateway stops asking redis", func() bool {
		_, _ = s.Acquire(rule, "", 1)
		return states.downs.Load() == 1
	})
	px.cut(false)
	px.slow(12 * time.Millisecond)
	took := waitFor(t, 5*time.Second, "cluster limiting resumed with redis answering in 12 ms", func() bool { return states.ups.Load() == 2 })
	t.Logf("resumed %v after the way was mended, every round trip 12 ms", took)
	// Calls are decided by Redis again (one late call on a busy machine
	// is a fallback, not a failure of this test).
	waitFor(t, 2*time.Second, "a call decided by redis answering in 12 ms", func() bool {
		ok, err := s.Acquire(rule, "", 1)
		return ok && err == nil
	})
}
