package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
)

// TestLiftCounterExpiresWithTheGateways: docs/cluster.md "Key layout": "Nothing needs
// cleaning up: every key expires" (and the gateway set "expires when every
// gateway is gone"). ForgetParam INCRs {ns}:lifts, and nothing set a TTL
// on it (beatSrc only read it), so once a value was lifted the key stayed
// in Redis forever. Each heartbeat now gives it the gateway set's expiry (a
// gateway that sees the counter go back to 0 only clears its block cache).
func TestLiftCounterExpiresWithTheGateways(t *testing.T) {
	url := redisURL(t)
	ns := namespace(t)
	s := newService(t, cluster.Options{URL: url, Namespace: ns, Timeout: time.Second, Heartbeat: 100 * time.Millisecond})
	rule := paramRule(2, 60, config.ThresholdGlobal)
	if _, _, err := s.AcquireParam(rule, 2, "v", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.ForgetParam(context.Background(), rule, 2, "v"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a few heartbeats
	rdb := redis.NewClient(must(redis.ParseURL(url)))
	defer rdb.Close()
	ttl, err := rdb.PTTL(context.Background(), "{"+ns+"}:lifts").Result()
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := rdb.PTTL(context.Background(), "{"+ns+"}:gw").Result()
	t.Logf("PTTL {ns}:lifts = %v, {ns}:gw = %v", ttl, gw)
	if ttl < 0 {
		t.Errorf("{ns}:lifts has no expiry (PTTL %v): it outlives every gateway; want it to expire like {ns}:gw", ttl)
	}
	// the test's own key: remove it
	rdb.Del(context.Background(), "{"+ns+"}:lifts")
}
