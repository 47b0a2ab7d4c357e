package cluster_test

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// TestClusterRulesSpreadOverShards: on a three-shard Redis Cluster each
// rule's windows sit in one hash slot of their own (its origins' windows
// beside it) and different rules land on different shards, so a batch of
// calls on six rules is split by slot, and every rule still counts exactly
// across two gateways; an avgLocal rule counts both gateways although the
// gateway set sits in another slot.
func TestClusterRulesSpreadOverShards(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0, time.Second)
	ns := namespace(t)
	rd := config.RedisTarget{ClusterAddrs: cl.Addrs()[:1]}
	a := newService(t, cluster.Options{Redis: rd, Namespace: ns, Timeout: time.Second, Heartbeat: 200 * time.Millisecond})
	b := newService(t, cluster.Options{Redis: rd, Namespace: ns, Timeout: time.Second, Heartbeat: 200 * time.Millisecond})
	var rules []*config.FlowRule
	for i := range 6 {
		r := qpsRule(float64(5+i), config.ThresholdGlobal)
		r.Resource = "r" + strconv.Itoa(i)
		r.LimitApp = "other" // counted per origin: several windows per rule
		r.StatIntervalMs = 60000
		rules = append(rules, r)
	}
	avg := qpsRule(4, config.ThresholdAvgLocal)
	avg.StatIntervalMs = 60000
	// Both gateways read two live gateways before the avgLocal calls.
	waitFor(t, 5*time.Second, "both gateways beat", func() bool {
		return a.Status().Up && b.Status().Up
	})
	time.Sleep(500 * time.Millisecond)

	// Calls on every rule at once, from many goroutines, so that batches
	// mix slots.
	passed := make([]atomic.Int64, len(rules)+1)
	var wg sync.WaitGroup
	for g := range 12 {
		s := a
		if g%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for i := range 40 {
				k := (g + i) % (len(rules) + 1)
				var ok bool
				var err error
				if k == len(rules) {
					ok, err = s.Acquire(avg, "", 1)
				} else {
					ok, err = s.Acquire(rules[k], "origin-"+strconv.Itoa(i%2), 1)
				}
				if err != nil {
					t.Errorf("call on rule %d: %v", k, err)
					return
				}
				if ok {
					passed[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k, r := range rules {
		// two origins, each counted up to the rule's count
		if got, want := passed[k].Load(), int64(2*r.Count); got != want {
			t.Errorf("rule %s (count %g per origin, 2 origins): %d passes, want %d", r.Resource, r.Count, got, want)
		}
	}
	if got := passed[len(rules)].Load(); got != 8 {
		t.Errorf("avgLocal count 4 with 2 live gateways: %d passes, want 8", got)
	}

	// Each rule's windows share a slot; the rules sit on more than one shard.
	shards := map[int]bool{}
	for _, n := range cl.Nodes {
		keys, err := n.Keys("*" + ns + ":w:*")
		if err != nil {
			t.Fatal(err)
		}
		slots := map[string]int{} // rule tag -> slot
		for _, k := range keys {
			tag := k[:strings.IndexByte(k, '}')+1]
			slot := cl.Slot(t, k)
			if prev, ok := slots[tag]; ok && prev != slot {
				t.Errorf("rule %s has windows in slots %d and %d", tag, prev, slot)
			}
			slots[tag] = slot
			shards[n.Port] = true
		}
		t.Logf("node %s holds %d windows of %d rules", n.Addr(), len(keys), len(slots))
	}
	if len(shards) < 2 {
		t.Errorf("the windows of 7 rules sit on %d shard(s) of 3, want them spread", len(shards))
	}
}
