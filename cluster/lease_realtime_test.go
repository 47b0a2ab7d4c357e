package cluster_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
)

// A hot window far from its count is decided mostly from leased tokens: one
// round trip per lease (up to statIntervalMs/40) instead of one per batch of calls.
func TestLeasingSavesRoundTripsFarFromTheCount(t *testing.T) {
	srv := startPrivateRedis(t)
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: namespace(t), Timeout: time.Second, Heartbeat: time.Hour})
	rdb := redis.NewClient(must(redis.ParseURL(srv.url())))
	defer rdb.Close()
	rule := qpsRule(1e9, config.ThresholdGlobal)
	before := evalCalls(t, rdb)
	const calls = 3000
	start := time.Now()
	for i := range calls {
		if ok, err := s.Acquire(rule, "", 1); !ok || err != nil {
			t.Fatalf("call %d = %v, %v; want a pass", i, ok, err)
		}
	}
	took := time.Since(start)
	asked := evalCalls(t, rdb) - before
	t.Logf("%d sequential calls in %v: %d reached Redis", calls, took, asked)
	if asked > calls/10 {
		t.Errorf("%d of %d calls reached Redis, want at most a tenth: leases should serve the rest", asked, calls)
	}
}

// Leases stop at half the count and every leased token is used by calls
// that keep coming, so the count stays exact.
func TestLeasingKeepsTheCountExact(t *testing.T) {
	url := redisURL(t)
	s := newService(t, cluster.Options{URL: url, Namespace: namespace(t), Timeout: time.Second})
	for _, count := range []float64{100, 1000, 7.5} {
		rule := qpsRule(count, config.ThresholdGlobal)
		rule.StatIntervalMs = 60000 // no pass leaves during the loop
		passed := 0
		for range 3 * int(count+1) {
			ok, err := s.Acquire(rule, "", 1)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				passed++
			}
		}
		if want := int(count); passed != want {
			t.Errorf("count %v: %d passed, want exactly %d", count, passed, want)
		}
	}
}
