package system_test

import (
	"sync/atomic"
	"testing"

	"sluice/config"
	"sluice/limiter/system"
)

var allOn = config.System{MaxQps: 1e12, MaxConcurrency: 1 << 40, MaxAvgRtMs: 1 << 30, MaxCpuUsage: 0.99, Adaptive: true}

func bench(b *testing.B, cfg config.System) {
	g := system.New(cfg, nil, cpuAt(0.1))
	b.ReportAllocs()
	now := int64(0)
	for b.Loop() {
		now += 1000
		tok, _ := g.Enter(now)
		tok.Exit(now+ms, false)
	}
}

func benchParallel(b *testing.B, cfg config.System) {
	g := system.New(cfg, nil, cpuAt(0.1))
	var clock atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			now := clock.Add(1000)
			tok, _ := g.Enter(now)
			tok.Exit(now+ms, false)
		}
	})
}

func BenchmarkEnterExitAllOff(b *testing.B)         { bench(b, config.System{}) }
func BenchmarkEnterExitConcurrency(b *testing.B)    { bench(b, config.System{MaxConcurrency: 1 << 40}) }
func BenchmarkEnterExitAllOn(b *testing.B)          { bench(b, allOn) }
func BenchmarkEnterExitAllOnParallel(b *testing.B)  { benchParallel(b, allOn) }
func BenchmarkEnterExitAllOffParallel(b *testing.B) { benchParallel(b, config.System{}) }
