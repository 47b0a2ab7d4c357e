package circuit_test

import (
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter/circuit"
)

// A call whose client left before the upstream answered tells nothing about
// errors, and about slowness only once it has outlasted maxAllowedRtMs.
func TestAbandon(t *testing.T) {
	errRatio := config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorRatio, Threshold: 0.5,
		StatIntervalMs: 1000, MinRequestAmount: 1, RetryTimeoutMs: 1000}
	slow := config.DegradeRule{Resource: "r", Strategy: config.DegradeSlowRatio, MaxAllowedRtMs: 100,
		Threshold: 0.5, StatIntervalMs: 1000, MinRequestAmount: 2, RetryTimeoutMs: 1000}

	t.Run("closed errorRatio records nothing", func(t *testing.T) {
		s := compile(t, []config.DegradeRule{errRatio}, nil, nil)
		bs := s.For("r")
		for i := int64(0); i < 10; i++ {
			tok, _ := bs.Enter(i * ms)
			tok.Abandon((i+5)*ms, 5*time.Millisecond)
		}
		// Had the abandoned calls counted as successes, 1 error in 11
		// would not trip.
		run(bs, []call{{At: 20, RtMs: 1, Failed: true}})
		if got := s.States()["r"]; got != circuit.Open {
			t.Errorf("after 10 abandoned calls and 1 error: %v, want open", got)
		}
	})
	t.Run("closed slowRatio records the slow ones", func(t *testing.T) {
		s := compile(t, []config.DegradeRule{slow}, nil, nil)
		bs := s.For("r")
		for i := int64(0); i < 2; i++ {
			tok, _ := bs.Enter(i * ms)
			tok.Abandon((i+500)*ms, 500*time.Millisecond)
		}
		if got := s.States()["r"]; got != circuit.Open {
			t.Errorf("after 2 calls abandoned after 500 ms: %v, want open", got)
		}
	})

	probeCases := []struct {
		name string
		rule config.DegradeRule
		rt   time.Duration
		want circuit.State
	}{
		{"errorRatio probe gives its slot back", errRatio, 10 * time.Second, circuit.HalfOpen},
		{"slowRatio probe still fast gives its slot back", slow, 50 * time.Millisecond, circuit.HalfOpen},
		{"slowRatio probe already slow re-opens", slow, 500 * time.Millisecond, circuit.Open},
	}
	for _, tc := range probeCases {
		t.Run(tc.name, func(t *testing.T) {
			s := compile(t, []config.DegradeRule{tc.rule}, nil, nil)
			bs := s.For("r")
			trip := []call{{At: 0, RtMs: 500, Failed: true}, {At: 1, RtMs: 500, Failed: true}}
			run(bs, trip) // open from 501 ms until 1501 ms
			at := int64(2000)
			tok, v := bs.Enter(at * ms)
			if v.Blocked {
				t.Fatalf("probe blocked: %+v", v)
			}
			tok.Abandon(at*ms+int64(tc.rt), tc.rt)
			if got := s.States()["r"]; got != tc.want {
				t.Fatalf("after the abandoned probe: %v, want %v", got, tc.want)
			}
			next, v := bs.Enter(at*ms + int64(tc.rt) + ms)
			if blocked := tc.want == circuit.Open; v.Blocked != blocked {
				t.Errorf("next call blocked=%v, want %v (%+v)", v.Blocked, blocked, v)
			}
			next.Exit(at*ms+int64(tc.rt)+2*ms, time.Millisecond, 200)
		})
	}
}
