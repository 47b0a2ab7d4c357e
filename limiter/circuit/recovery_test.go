package circuit_test

import (
	"sync"
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter/circuit"
)

// Half-open under concurrency, two breakers on one resource, a reload in
// the middle of each spell (same rules: the breakers and their spell are
// kept): exactly probeNum probes are out at once; a probe whose client
// leaves (Cancel, or Abandon of a fast call) frees its slot for the next
// call; the breakers close once probeNum probes succeeded and stay closed.
func TestProbesCancelReloadConcurrent(t *testing.T) {
	rules := []config.DegradeRule{
		{Resource: "r", Strategy: config.DegradeErrorCount, Threshold: 0, StatIntervalMs: 1000, RetryTimeoutMs: 100, ProbeNum: 3},
		{Resource: "r", Strategy: config.DegradeSlowRatio, MaxAllowedRtMs: 50, Threshold: 0.5, StatIntervalMs: 1000, RetryTimeoutMs: 100, ProbeNum: 3},
	}
	s := compile(t, rules, nil, nil)
	run(s.For("r"), []call{{0, 0, true}}) // errorCount opens
	now := int64(100 * ms)
	for round := 0; round < 20; round++ {
		bs := s.For("r")
		passed := enterAtOnce(bs, now, 32)
		if len(passed) != 3 {
			t.Fatalf("round %d: %d probes passed, want 3", round, len(passed))
		}
		s = compile(t, rules, s, nil) // reload, unchanged
		if got := s.States()["r"]; got != circuit.HalfOpen {
			t.Fatalf("round %d: %v after reload, want half-open", round, got)
		}
		// One client leaves before forwarding, one abandons a fast call.
		passed[0].Cancel(now)
		passed[1].Abandon(now, time.Millisecond)
		more := enterAtOnce(s.For("r"), now, 32)
		if len(more) != 2 {
			t.Fatalf("round %d: %d probes after two gave back, want 2", round, len(more))
		}
		var wg sync.WaitGroup
		for _, tok := range append(more, passed[2]) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tok.Exit(now, time.Millisecond, 200)
			}()
		}
		wg.Wait()
		if got := s.States()["r"]; got != circuit.Closed {
			t.Fatalf("round %d: %v after 3 probes succeeded, want closed", round, got)
		}
		if got := enterAtOnce(s.For("r"), now, 16); len(got) != 16 {
			t.Fatalf("round %d: closed breaker passed %d of 16", round, len(got))
		}
		// Re-open for the next round.
		now += 10 * ms
		run(s.For("r"), []call{{now / ms, 0, true}})
		if got := s.States()["r"]; got != circuit.Open {
			t.Fatalf("round %d: %v after a failure, want open", round, got)
		}
		now += 100 * ms
	}
}

// Calls forwarded before the breaker opened that finish only after the
// probes closed it (a slow upstream's timeouts) say nothing of the
// recovered upstream: the probes just showed it answers. Counted in the
// fresh window, they re-opened the breaker at once, without any call
// forwarded after the recovery having failed.
func TestStaleCallsDoNotReopenAfterRecovery(t *testing.T) {
	for _, strategy := range []config.DegradeStrategy{config.DegradeErrorRatio, config.DegradeErrorCount, config.DegradeSlowRatio} {
		rule := config.DegradeRule{Resource: "r", Strategy: strategy, Threshold: 0.5, MaxAllowedRtMs: 100,
			StatIntervalMs: 10000, RetryTimeoutMs: 1000, MinRequestAmount: 5, ProbeNum: 1}
		if strategy == config.DegradeErrorCount {
			rule.Threshold = 3
		}
		s := compile(t, []config.DegradeRule{rule}, nil, nil)
		bs := s.For("r")
		// 10 slow calls in flight from t=0.
		var stale []circuit.Token
		for range 10 {
			tok, v := bs.Enter(0)
			if v.Blocked {
				t.Fatal("closed breaker blocked")
			}
			stale = append(stale, tok)
		}
		// Others fail fast (or are slow) and trip the breaker at 100 ms.
		bad := func(at int64) {
			tok, v := bs.Enter(at * ms)
			if !v.Blocked {
				tok.Exit(at*ms, 200*time.Millisecond, 500)
			}
		}
		for i := range 6 {
			bad(100 + int64(i))
		}
		if got := s.States()["r"]; got != circuit.Open {
			t.Fatalf("%s: %v, want open", strategy, got)
		}
		// The probe succeeds at 1.2 s: closed.
		probe, v := bs.Enter(1200 * ms)
		if v.Blocked {
			t.Fatalf("%s: probe blocked", strategy)
		}
		probe.Exit(1210*ms, time.Millisecond, 200)
		if got := s.States()["r"]; got != circuit.Closed {
			t.Fatalf("%s: %v after the probe succeeded, want closed", strategy, got)
		}
		// The stale calls time out at 2 s.
		for i := range stale {
			stale[i].Exit(2000*ms, 2000*time.Millisecond, 0)
		}
		if got := s.States()["r"]; got != circuit.Closed {
			t.Errorf("%s: %v after calls forwarded before the trip finished, want closed", strategy, got)
		}
		// Fresh failures still trip it.
		for i := range 6 {
			bad(2100 + int64(i))
		}
		if got := s.States()["r"]; got != circuit.Open {
			t.Errorf("%s: %v after fresh failures, want open", strategy, got)
		}
	}
}
