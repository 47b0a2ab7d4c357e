package circuit_test

import (
	"sync/atomic"
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter/circuit"
)

func benchBreakers(b *testing.B, n int) *circuit.Breakers {
	var rules []config.DegradeRule
	for i := 0; i < n; i++ {
		rules = append(rules, config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorRatio,
			Threshold: 0.5, StatIntervalMs: 1000, MinRequestAmount: 5, RetryTimeoutMs: 1000})
	}
	s := circuit.Compile(defaulted(rules...), nil, nil)
	s.Install()
	return s.For("r")
}

// BenchmarkEnterExit is the cost a closed breaker adds to one request.
func BenchmarkEnterExit(b *testing.B) {
	bs := benchBreakers(b, 1)
	b.ReportAllocs()
	now := int64(0)
	for b.Loop() {
		now += 1000 // 1 µs per call: the window keeps sliding
		tok, _ := bs.Enter(now)
		tok.Exit(now, time.Millisecond, 200)
	}
}

func BenchmarkEnterExitParallel(b *testing.B) {
	bs := benchBreakers(b, 1)
	var clock atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			now := clock.Add(1000)
			tok, _ := bs.Enter(now)
			tok.Exit(now, time.Millisecond, 200)
		}
	})
}

// BenchmarkEnterOpen is the cost of blocking while open.
func BenchmarkEnterOpen(b *testing.B) {
	bs := benchBreakers(b, 1)
	for i := int64(0); i < 10; i++ {
		tok, _ := bs.Enter(i)
		tok.Exit(i, 0, 500)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, v := bs.Enter(20); !v.Blocked {
			b.Fatal("not open")
		}
	}
}

func BenchmarkNoRules(b *testing.B) {
	var bs *circuit.Breakers
	b.ReportAllocs()
	for b.Loop() {
		tok, _ := bs.Enter(0)
		tok.Exit(0, 0, 200)
	}
}
