package limiter_test

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkQpsCheck is the cost of one reject-rule check (Enter then Exit)
// with calls arriving exactly at the rule's rate, so the window is full and
// every call is decided at the limit; run with -cpu 1,2 for contention.
func BenchmarkQpsCheck(b *testing.B) {
	for _, count := range []float64{10, 100000} {
		step := sec / int64(count)
		b.Run(fmt.Sprintf("count=%g", count), func(b *testing.B) {
			c := compile(b, qps("r", count)).Checker("r", "default")
			var clock atomic.Int64
			clock.Store(t0)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					now := clock.Add(step)
					tok, v := c.Enter(now, "", 1)
					if !v.Blocked {
						tok.Exit(now, false)
					}
				}
			})
		})
	}
}
