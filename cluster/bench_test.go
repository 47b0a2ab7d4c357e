package cluster_test

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
	"sluice/internal/redistest"
)

// The benchmarks run against the local Redis. Compare the Service (batched)
// with the baseline: the same script, one EVALSHA per call, no batching.
//
//	go test -run '^$' -bench . -benchmem -benchtime=300ms ./cluster

// BenchmarkAcquire: every call passes. With leases, most calls take a
// leased token (the window stays far from its count); without, every call
// takes the full write path in Redis, as near the count.
func BenchmarkAcquire(b *testing.B) {
	for _, lease := range []bool{true, false} {
		name := "leased"
		if !lease {
			name = "redis"
		}
		b.Run(name, func(b *testing.B) { benchAcquire(b, lease) })
	}
}

func benchAcquire(b *testing.B, lease bool) {
	url := redisURL(b)
	s := newService(b, cluster.Options{URL: url, Namespace: namespace(b)})
	if !lease {
		s.DisableLeases()
	}
	rule := qpsRule(1e12, config.ThresholdGlobal)
	b.Run("sequential", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Acquire(rule, "", 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16) // a gateway has many requests in flight
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Acquire(rule, "", 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkAcquireBlocked is a full window under overload: after the first
// refusal, calls are answered from the block cache until a token frees.
func BenchmarkAcquireBlocked(b *testing.B) {
	url := redisURL(b)
	s := newService(b, cluster.Options{URL: url, Namespace: namespace(b)})
	rule := qpsRule(1, config.ThresholdGlobal)
	rule.StatIntervalMs = 40 * 60 * 1000 // no pass leaves during the run
	s.Acquire(rule, "", 1)
	b.Run("sequential", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, err := s.Acquire(rule, "", 1); ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, err := s.Acquire(rule, "", 1); ok || err != nil {
					b.Error(ok, err)
					return
				}
			}
		})
	})
}

func BenchmarkBaselineOneEvalShaPerCall(b *testing.B) {
	url := redisURL(b)
	opt, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	script := redis.NewScript(cluster.AcquireSrc)
	keys := []string{"{" + namespace(b) + ":w:baseline}:"}
	call := func(ctx context.Context) error {
		// live gateways, Redis's clock, their stamp, then count, n,
		// statIntervalMs, avgLocal, demand (no lease), no returned tokens
		return script.Run(ctx, rdb, keys, 0, 0, 0, "1e12", 1, "1000", "0", 0, 0, 0, "0").Err()
	}
	ctx := context.Background()
	b.Run("sequential", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := call(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// latencyHist is a per-goroutine histogram in 1µs steps up to 20ms, so that
// measuring adds no allocation per call.
type latencyHist [20001]int64

func (h *latencyHist) add(d time.Duration) { h[min(int(d/time.Microsecond), len(h)-1)]++ }

func (h *latencyHist) merge(o *latencyHist) {
	for i, v := range o {
		h[i] += v
	}
}

// quantile returns the q-quantile in µs.
func (h *latencyHist) quantile(q float64) float64 {
	var total int64
	for _, v := range h {
		total += v
	}
	want := int64(q * float64(total))
	var seen int64
	for i, v := range h {
		seen += v
		if seen > want {
			return float64(i)
		}
	}
	return float64(len(h) - 1)
}

// runLatency runs call from 16 goroutines per CPU and reports p50/p99 per call.
func runLatency(b *testing.B, call func() error) {
	var mu sync.Mutex
	var all latencyHist
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		h := new(latencyHist)
		for pb.Next() {
			t0 := time.Now()
			if err := call(); err != nil {
				b.Error(err)
				return
			}
			h.add(time.Since(t0))
		}
		mu.Lock()
		all.merge(h)
		mu.Unlock()
	})
	b.ReportMetric(all.quantile(0.5), "µs-p50")
	b.ReportMetric(all.quantile(0.99), "µs-p99")
}

// BenchmarkLatency compares per-call latency under 32 concurrent callers:
// batched Service vs one EVALSHA per call.
func BenchmarkLatency(b *testing.B) {
	url := redisURL(b)
	s := newService(b, cluster.Options{URL: url, Namespace: namespace(b)})
	rule := qpsRule(1e12, config.ThresholdGlobal)
	b.Run("service", func(b *testing.B) {
		runLatency(b, func() error { _, err := s.Acquire(rule, "", 1); return err })
	})
	nl := newService(b, cluster.Options{URL: url, Namespace: namespace(b)})
	nl.DisableLeases()
	b.Run("service-no-lease", func(b *testing.B) {
		runLatency(b, func() error { _, err := nl.Acquire(rule, "", 1); return err })
	})
	opt, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	script := redis.NewScript(cluster.AcquireSrc)
	keys := []string{"{" + namespace(b) + ":w:baseline}:"}
	b.Run("baseline", func(b *testing.B) {
		runLatency(b, func() error {
			return script.Run(context.Background(), rdb, keys, 0, 0, 0, "1e12", 1, "1000", "0", 0, 0, 0, "0").Err()
		})
	})
}

// BenchmarkAcquireNearCount is cluster-mode throughput near the count, with
// leases on as in a gateway. half-full: a one-hour window of count 4e6 is
// filled past half by one call of 2.1e6 tokens, so the script leases nothing
// and every call is a pass decided in Redis. saturated: count 1000 a second
// under as much load as the machine makes; passes/s shows the window's rate
// under overload: passes/interval is the passes over the intervals begun
// (count for an exact window, whose passes come in one burst per interval).
//
//	go test -run '^$' -bench AcquireNearCount -benchmem -benchtime=2s ./cluster
func BenchmarkAcquireNearCount(b *testing.B) {
	url := redisURL(b)
	s := newService(b, cluster.Options{URL: url, Namespace: namespace(b), Timeout: time.Second})
	half := qpsRule(4e6, config.ThresholdGlobal)
	half.StatIntervalMs = 3600 * 1000
	half.LimitApp = "a,b" // per-origin windows: each run fills a fresh one
	runs := 0
	fill := func(b *testing.B) string {
		runs++
		key := "run" + strconv.Itoa(runs)
		if ok, err := s.Acquire(half, key, 2_100_000); !ok || err != nil {
			b.Fatalf("filling the window: %v, %v", ok, err)
		}
		return key
	}
	perSecond := func(b *testing.B) { b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s") }
	// report: each pass also asks what the window has left (the RateLimit
	// fields), which costs the script a binary search of the window.
	for _, report := range []bool{false, true} {
		suffix := ""
		if report {
			suffix = "/report"
		}
		b.Run("half-full/sequential"+suffix, func(b *testing.B) {
			key := fill(b)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if ok, _, _, _, err := s.AcquireFlow(half, key, 1, report); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
			perSecond(b)
		})
		b.Run("half-full/parallel"+suffix, func(b *testing.B) {
			key := fill(b)
			b.ReportAllocs()
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if ok, _, _, _, err := s.AcquireFlow(half, key, 1, report); !ok || err != nil {
						b.Error(ok, err)
						return
					}
				}
			})
			perSecond(b)
		})
	}
	b.Run("saturated/parallel", func(b *testing.B) {
		rule := qpsRule(1000, config.ThresholdGlobal)
		rule.LimitApp = "a,b"
		runs++
		key := "sat" + strconv.Itoa(runs)
		var passes atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(16)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ok, err := s.Acquire(rule, key, 1)
				if err != nil {
					b.Error(err)
					return
				}
				if ok {
					passes.Add(1)
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		b.ReportMetric(float64(passes.Load())/math.Ceil(b.Elapsed().Seconds()), "passes/interval")
	})
}

// BenchmarkAcquireShards is throughput near the count on a Redis Cluster of
// one shard and of three: six rules, each window filled past half so that
// every call is a pass decided in Redis (no lease), called from 16
// goroutines per CPU; calls on several rules spread over the shards' slots,
// one script run per slot, sent to the shards at once.
//
//	go test -run '^$' -bench AcquireShards -benchtime=3s ./cluster
func BenchmarkAcquireShards(b *testing.B) {
	for _, shards := range []int{1, 3} {
		b.Run("shards="+strconv.Itoa(shards), func(b *testing.B) {
			var cl *redistest.Cluster
			if shards == 1 {
				cl = redistest.StartSingleShardCluster(b, time.Second)
			} else {
				cl = redistest.StartCluster(b, shards, 0, time.Second)
			}
			s := newService(b, cluster.Options{Redis: config.RedisTarget{ClusterAddrs: cl.Addrs()},
				Namespace: namespace(b), Timeout: time.Second})
			var rules []*config.FlowRule
			for i := range 6 {
				r := qpsRule(4e6, config.ThresholdGlobal)
				r.Resource = "r" + strconv.Itoa(i)
				r.StatIntervalMs = 3600 * 1000
				if ok, err := s.Acquire(r, "", 2_100_000); !ok || err != nil {
					b.Fatalf("filling rule %d: %v, %v", i, ok, err)
				}
				rules = append(rules, r)
			}
			// Redis's own CPU per shard (INFO cpu), to tell what bounds the
			// rate: a shard at one core is full; shards on their own cores
			// or hosts add up.
			cpu := func() []float64 {
				out := make([]float64, len(cl.Nodes))
				for i, n := range cl.Nodes {
					for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
						v, _ := strconv.ParseFloat(n.Info(f), 64)
						out[i] += v
					}
				}
				return out
			}
			before := cpu()
			var next atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := rules[next.Add(1)%int64(len(rules))]
				for pb.Next() {
					if ok, err := s.Acquire(r, "", 1); !ok || err != nil {
						b.Error(ok, err)
						return
					}
				}
			})
			b.StopTimer()
			after := cpu()
			var total, busiest float64
			for i := range after {
				d := after[i] - before[i]
				total += d
				busiest = max(busiest, d)
			}
			rate := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "passes/s")
			b.ReportMetric(total*1e6/float64(b.N), "redis-µs/pass")
			b.ReportMetric(busiest/b.Elapsed().Seconds(), "busiest-shard-cores")
			// What the shards could pass with a core each, at this cost.
			b.ReportMetric(rate*b.Elapsed().Seconds()/busiest, "passes/s-at-a-core-per-shard")
		})
	}
}

// BenchmarkAcquireParam is one value of a clusterMode param rule: "leased"
// never blocks and is served mostly from leases (count >= 2048); "redis"
// is every call a round trip (leases off: the key is built, one
// allocation); "blocked" is a full value answered from the block cache (no
// round trip, no allocation).
func BenchmarkAcquireParam(b *testing.B) {
	url := redisURL(b)
	s := newService(b, cluster.Options{URL: url, Namespace: namespace(b)})
	free := paramRule(1e9, 1, config.ThresholdGlobal)
	full := paramRule(1, 2400, config.ThresholdGlobal) // no pass leaves during the run
	s.AcquireParam(full, 1, "k", 1)
	b.Run("leased", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, _, err := s.AcquireParam(free, 1e9, "k", 1); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	direct := newService(b, cluster.Options{URL: url, Namespace: namespace(b), Timeout: 5 * time.Second})
	direct.DisableLeases()
	b.Run("redis", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, _, err := direct.AcquireParam(free, 1e9, "k", 1); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("blocked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, _, err := s.AcquireParam(full, 1, "k", 1); ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}

// BenchmarkAcquireQuota: a calendar quota's call, against AcquireParam's
// redis case (the same batched script, one counter instead of a ring); a
// blocked value is answered by the block cache until the reset.
func BenchmarkAcquireQuota(b *testing.B) {
	url := redisURL(b)
	s := newService(b, cluster.Options{URL: url, Namespace: namespace(b), Timeout: 5 * time.Second})
	free := quotaRule(config.WindowDay, "Europe/Berlin")
	full := quotaRule(config.WindowDay, "Europe/Berlin")
	b.Run("redis", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, _, _, _, err := s.AcquireQuota(free, 1e9, "k", 1); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	s.AcquireQuota(full, 1, "k", 1)
	b.Run("blocked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, _, _, _, err := s.AcquireQuota(full, 1, "k", 1); ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}

// BenchmarkQuotaGiveBack: a countOn failure call's place given back (its
// answer no failure), one round trip after the answer, on a Redis of its
// own: each give-back leaves its mark there (redis-B/mark, from
// used_memory) until the counter expires, ten minutes after the reset.
func BenchmarkQuotaGiveBack(b *testing.B) {
	srv := redistest.Start(b)
	s := newService(b, cluster.Options{URL: srv.URL(), Namespace: "bench", Timeout: 5 * time.Second, Heartbeat: time.Hour})
	r := quotaRule(config.WindowDay, "UTC")
	ok, _, _, _, stamp, err := s.AcquireQuotaStamp(r, 1e9, "203.0.113.7", 1)
	if !ok || err != nil {
		b.Fatal(ok, err)
	}
	used := func() float64 {
		b.Helper()
		m := srv.Info("used_memory")
		v, err := strconv.ParseFloat(m, 64)
		if err != nil {
			b.Fatalf("used_memory %q: %v", m, err)
		}
		return v
	}
	before := used()
	b.ReportAllocs()
	for b.Loop() {
		s.GiveBackQuota(r, 1e9, "203.0.113.7", 1, stamp)
	}
	b.ReportMetric((used()-before)/float64(b.N), "redis-B/mark")
}
