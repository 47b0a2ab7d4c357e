package cluster_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
)

// The benchmarks run against the local Redis. Compare the Service (batched)
// with the baseline: the same script, one EVALSHA per call, no batching.
//
//	go test -run '^$' -bench . -benchmem -benchtime=300ms ./cluster

func BenchmarkAcquire(b *testing.B) {
	url := redisURL(b)
	s := newService(b, cluster.Options{URL: url, Namespace: namespace(b)})
	rule := qpsRule(1e12, config.ThresholdGlobal) // every call passes: the full write path
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

func BenchmarkBaselineOneEvalShaPerCall(b *testing.B) {
	url := redisURL(b)
	opt, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	script := redis.NewScript(cluster.AcquireSrc)
	ns := "{" + namespace(b) + "}:"
	keys := []string{ns + "gw", ns + "f:baseline:"}
	call := func(ctx context.Context) error {
		// expiry, then count, n, bucket ms, buckets, avgLocal
		return script.Run(ctx, rdb, keys, "3000", "1e12", 1, "25", "40", "0").Err()
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
