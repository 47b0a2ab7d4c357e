package cluster_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"sluice/cluster"
	"sluice/config"
)

// TestUnansweredCallsAreCounted: every call that got no decision from
// Redis, and only those, is reported to OnUnanswered with why (what
// sluice_cluster_unanswered_total counts): timeouts while Redis is stopped,
// errors once it is killed, and the calls not sent while the breaker is
// open. The breaker's state alone (sluice_cluster_redis_up) does not show
// the calls a slow Redis leaves to the fallback before it opens, nor how
// many the fallback decided.
func TestUnansweredCallsAreCounted(t *testing.T) {
	srv := startPrivateRedis(t)
	var states stateLog
	var got [len(cluster.Causes)]atomic.Int64
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: namespace(t), Timeout: 20 * time.Millisecond,
		Heartbeat: 100 * time.Millisecond, OnState: states.on,
		OnUnanswered: func(c cluster.Cause) { got[c].Add(1) }})
	rule := qpsRule(1e6, config.ThresholdGlobal)
	waitFor(t, 5*time.Second, "redis reachable", func() bool { return states.ups.Load() == 1 })

	var want [len(cluster.Causes)]int64
	call := func() {
		_, err := s.Acquire(rule, "", 1)
		switch {
		case err == nil:
		case errors.Is(err, cluster.ErrTimeout):
			want[cluster.CauseTimeout]++
		case err == cluster.ErrUnavailable:
			want[cluster.CauseDown]++
		default:
			want[cluster.CauseError]++
		}
	}
	for range 20 {
		call()
	}
	srv.pause()
	waitFor(t, 5*time.Second, "the breaker opens on a stopped redis", func() bool { call(); return states.downs.Load() == 1 })
	for range 10 {
		call()
	}
	srv.resume()
	waitFor(t, 5*time.Second, "redis answers again", func() bool { return states.ups.Load() == 2 })
	for range 20 {
		call()
	}
	srv.kill()
	waitFor(t, 5*time.Second, "the breaker opens on a killed redis", func() bool { call(); return states.downs.Load() == 2 })
	for range 10 {
		call()
	}
	for _, c := range cluster.Causes {
		if got[c].Load() != want[c] || want[c] == 0 {
			t.Errorf("%s: %d reported, %d calls got no decision for that cause (want them equal, and some)", c, got[c].Load(), want[c])
		}
	}
	t.Logf("unanswered: down %d, timeout %d, error %d", want[cluster.CauseDown], want[cluster.CauseTimeout], want[cluster.CauseError])
}
