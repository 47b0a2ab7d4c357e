package cluster_test

import (
	"testing"
	"time"

	"sluice/cluster"
	"sluice/config"
	"sluice/internal/redistest"
)

// TestEveryFormCountsInRedis: a Service on each form of naming the Redis (a
// URL, a Sentinel-watched master, a three-shard Cluster) decides a global
// rule in Redis: two Services sharing the namespace pass exactly count in
// all within the interval.
func TestEveryFormCountsInRedis(t *testing.T) {
	srv := redistest.Start(t)
	sen := redistest.StartSentinels(t, redistest.SentinelOptions{})
	cl := redistest.StartCluster(t, 3, 0, time.Second)
	forms := []struct {
		name string
		rd   config.RedisTarget
	}{
		{"redis", config.RedisTarget{Redis: srv.URL()}},
		{"sentinel", config.RedisTarget{Sentinel: &config.Sentinel{MasterName: sen.MasterName, Addrs: sen.Addrs()}}},
		{"cluster", config.RedisTarget{ClusterAddrs: cl.Addrs()}},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			ns := namespace(t)
			a := newService(t, cluster.Options{Redis: f.rd, Namespace: ns, Timeout: time.Second})
			b := newService(t, cluster.Options{Redis: f.rd, Namespace: ns, Timeout: time.Second})
			rule := qpsRule(7, config.ThresholdGlobal)
			rule.StatIntervalMs = 60000 // no pass expires during the test
			passed := 0
			for i := range 20 {
				s := a
				if i%2 == 1 {
					s = b
				}
				ok, err := s.Acquire(rule, "", 1)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if ok {
					passed++
				}
			}
			if passed != 7 {
				t.Errorf("%s: %d of 20 calls passed across two gateways, want the count, 7", f.name, passed)
			}
		})
	}
}
