package window_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"sluice/limiter/window"
)

// BenchmarkExactTryAdd is one check at the limit (calls arrive exactly at
// the rate, so every call is decided with a full window); -cpu 1,2 shows the
// mutex under contention. It also reports the window's bytes once full.
func BenchmarkExactTryAdd(b *testing.B) {
	for _, count := range []float64{10, 1000, 100000} {
		b.Run(fmt.Sprintf("count=%g", count), func(b *testing.B) {
			w := window.NewExact(sec, count)
			step := sec / int64(count)
			var clock atomic.Int64
			clock.Store(t0)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var r window.Result
				for pb.Next() {
					w.TryAdd(clock.Add(step), 1, count, false, &r)
				}
			})
			b.ReportMetric(float64(w.Bytes()), "window-bytes")
		})
	}
}
