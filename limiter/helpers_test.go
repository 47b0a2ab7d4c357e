package limiter_test

import (
	"slices"
	"testing"

	"sluice/config"
	"sluice/limiter"
)

const (
	ms  = int64(1e6)
	sec = int64(1e9)
	// t0 is an arbitrary instant not aligned to any bucket.
	t0 = int64(1_000_000_000_000) + 123_456_789
)

func compile(t testing.TB, rules ...config.FlowRule) *limiter.Flow {
	t.Helper()
	f := limiter.Compile(defaulted(rules...), nil, limiter.Options{})
	return f
}

// defaulted gives rules built here config's defaults for the fields they
// leave zero, as config.Load gives a file's rules; limiter takes rules as
// they are. maxQueueingTimeMs stays as the test wrote it, 0 (no queue)
// included: config.Defaults would take a 0 for unset and give it 500.
func defaulted(rules ...config.FlowRule) []config.FlowRule {
	cfg := config.Config{FlowRules: slices.Clone(rules)}
	config.Defaults(&cfg)
	for i := range cfg.FlowRules {
		cfg.FlowRules[i].MaxQueueingTimeMs = rules[i].MaxQueueingTimeMs
	}
	return cfg.FlowRules
}

func qps(resource string, count float64) config.FlowRule {
	return config.FlowRule{Resource: resource, LimitApp: "default", Grade: config.GradeQPS, Count: count,
		Strategy: config.StrategyDirect, ControlBehavior: config.BehaviorReject, StatIntervalMs: 1000}
}

// drive offers calls evenly at rate per second from start for dur and returns
// the instants of the calls that passed (their forward time: enter + wait).
func drive(c *limiter.Checker, start, dur int64, rate float64, origin string, n int64) []int64 {
	var passed []int64
	step := float64(sec) / rate
	for i := 0; ; i++ {
		now := start + int64(float64(i)*step)
		if now >= start+dur {
			return passed
		}
		tok, v := c.Enter(now, origin, n)
		if !v.Blocked {
			passed = append(passed, now+int64(v.Wait))
			tok.Exit(now, false)
		}
	}
}
