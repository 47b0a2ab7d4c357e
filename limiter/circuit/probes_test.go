package circuit_test

import (
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter/circuit"
)

// TestErrorStatuses: which answers a breaker counts as errors. Each case
// sends five calls answered with one status through an errorCount breaker
// (threshold 4: the fifth error trips it), then, once open, a probe answered
// with the same status: an error re-opens, anything else closes.
func TestErrorStatuses(t *testing.T) {
	tests := []struct {
		name     string
		statuses []string // nil: the default
		status   int
		isError  bool
	}{
		{"default: 500 is an error", nil, 500, true},
		{"default: 503 is an error", nil, 503, true},
		{"default: 429 is not", nil, 429, false},
		{"default: 404 is not", nil, 404, false},
		{"no answer is always an error", nil, 0, true},
		{"[429]: 429 is an error", []string{"429"}, 429, true},
		{"[429]: 500 is not", []string{"429"}, 500, false},
		{"[429]: no answer still is", []string{"429"}, 0, true},
		{"[5xx, 429]: 429", []string{"5xx", "429"}, 429, true},
		{"[5xx, 429]: 502", []string{"5xx", "429"}, 502, true},
		{"[5xx, 429]: 404 is not", []string{"5xx", "429"}, 404, false},
		{"[503]: 503", []string{"503"}, 503, true},
		{"[503]: 500 is not", []string{"503"}, 500, false},
		{"[4XX]: 401 (either case of x)", []string{"4XX"}, 401, true},
		{"[4xx]: 499", []string{"4xx"}, 499, true},
		{"[4xx]: 500 is not", []string{"4xx"}, 500, false},
		{"[]: only no answer; 500 is not", []string{}, 500, false},
		{"[]: no answer is", []string{}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rule := config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorCount, Threshold: 4,
				StatIntervalMs: 1000, MinRequestAmount: 1, RetryTimeoutMs: 1000, ErrorStatuses: tt.statuses}
			s := compile(t, []config.DegradeRule{rule}, nil, nil)
			bs := s.For("r")
			// A breaker that counts this status trips on it; one that does
			// not is tripped by transport failures, to see the probe decide.
			status := tt.status
			if !tt.isError {
				for i := int64(0); i < 5; i++ {
					tok, _ := bs.Enter(i * ms)
					tok.Exit(i*ms, time.Millisecond, tt.status)
				}
				if got := s.States()["r"]; got != circuit.Closed {
					t.Fatalf("after 5 answers %d: %v, want closed", tt.status, got)
				}
				status = 0
			}
			for i := int64(10); i < 15; i++ {
				tok, _ := bs.Enter(i * ms)
				tok.Exit(i*ms, time.Millisecond, status)
			}
			if got := s.States()["r"]; got != circuit.Open {
				t.Fatalf("after 5 errors: %v, want open", got)
			}
			probe, v := bs.Enter(2000 * ms)
			if v.Blocked {
				t.Fatalf("probe blocked: %+v", v)
			}
			probe.Exit(2001*ms, time.Millisecond, tt.status)
			want := circuit.Closed
			if tt.isError {
				want = circuit.Open
			}
			if got := s.States()["r"]; got != want {
				t.Errorf("after a probe answered %d: %v, want %v", tt.status, got, want)
			}
		})
	}
}

// probeStep is one step of TestProbeNum, at ms At: a call entering (Want:
// passes or not), or, with Probe > 0, the probe that passed as the Probe-th
// passed call finishing with Status (Cancel: given back instead). After
// the step the resource is in State.
type probeStep struct {
	At     int64
	Enter  bool
	Want   bool
	Probe  int
	Status int
	Cancel bool
	State  circuit.State
}

// TestProbeNum walks a breaker with probeNum 3 (retryTimeoutMs 1 s, tripped
// at 0) through its half-open spells on synthetic time.
func TestProbeNum(t *testing.T) {
	const (
		C = circuit.Closed
		O = circuit.Open
		H = circuit.HalfOpen
	)
	enter := func(at int64, want bool, st circuit.State) probeStep {
		return probeStep{At: at, Enter: true, Want: want, State: st}
	}
	done := func(at int64, probe, status int, st circuit.State) probeStep {
		return probeStep{At: at, Probe: probe, Status: status, State: st}
	}
	cancel := func(at int64, probe int, st circuit.State) probeStep {
		return probeStep{At: at, Probe: probe, Cancel: true, State: st}
	}
	tests := []struct {
		name  string
		steps []probeStep
	}{
		{"three probes pass, the fourth waits; all three good close", []probeStep{
			enter(999, false, O),
			enter(1000, true, H), enter(1001, true, H), enter(1002, true, H),
			enter(1003, false, H), enter(1500, false, H),
			done(1010, 1, 200, H), enter(1011, false, H), // one good is not enough
			done(1020, 2, 200, H),
			done(1030, 3, 200, C),
			enter(1031, true, C),
		}},
		{"the first probe failing re-opens at once", []probeStep{
			enter(1000, true, H), enter(1001, true, H), enter(1002, true, H),
			done(1010, 1, 500, O),
			enter(1011, false, O),
			done(1020, 2, 200, O), done(1030, 3, 200, O), // too late to close
			enter(2009, false, O),
			enter(2010, true, H), // retryTimeoutMs after the failure
		}},
		{"the last probe failing re-opens after two good ones", []probeStep{
			enter(1000, true, H), enter(1001, true, H), enter(1002, true, H),
			done(1010, 1, 200, H), done(1020, 2, 200, H),
			done(1030, 3, 0, O), // no answer
			enter(1500, false, O),
			enter(2030, true, H),
		}},
		{"a cancelled probe frees its slot for another call", []probeStep{
			enter(1000, true, H), enter(1001, true, H), enter(1002, true, H),
			cancel(1003, 2, H),
			enter(1004, true, H), // the 4th passed call takes probe 2's place
			enter(1005, false, H),
			done(1010, 1, 200, H), done(1011, 3, 200, H),
			done(1012, 4, 200, C),
		}},
		{"the next spell waits for the probes of the last one", []probeStep{
			enter(1000, true, H), enter(1001, true, H), enter(1002, true, H),
			done(1010, 1, 500, O),
			enter(2010, false, O), // probes 2 and 3 are still out
			done(2500, 2, 200, O),
			enter(2501, false, O),
			done(2600, 3, 500, O), // a failure of the old spell opens nothing anew
			enter(2601, true, H),  // no probe out: a new spell
			enter(2602, true, H), enter(2603, true, H), enter(2604, false, H),
			done(2610, 4, 200, H), done(2611, 5, 200, H), done(2612, 6, 200, C),
		}},
		{"a cancel after the spell failed frees nothing in the next", []probeStep{
			enter(1000, true, H), enter(1001, true, H), enter(1002, true, H),
			done(1010, 1, 500, O),
			cancel(1020, 2, O), cancel(1030, 3, O),
			enter(2010, true, H), enter(2011, true, H), enter(2012, true, H), enter(2013, false, H),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rule := config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorCount, Threshold: 0,
				StatIntervalMs: 1000, MinRequestAmount: 1, RetryTimeoutMs: 1000, ProbeNum: 3}
			s := compile(t, []config.DegradeRule{rule}, nil, nil)
			bs := s.For("r")
			run(bs, []call{{At: 0, Failed: true}}) // open until 1000 ms
			var passed []*circuit.Token
			for i, st := range tt.steps {
				if st.Enter {
					tok, v := bs.Enter(st.At * ms)
					if pass := !v.Blocked; pass != st.Want {
						t.Fatalf("step %d at %d ms: passed %v, want %v (%+v)", i, st.At, pass, st.Want, v)
					}
					if !v.Blocked {
						passed = append(passed, &tok)
					}
				} else if st.Cancel {
					passed[st.Probe-1].Cancel(st.At * ms)
				} else {
					passed[st.Probe-1].Exit(st.At*ms, time.Millisecond, st.Status)
				}
				if got := s.States()["r"]; got != st.State {
					t.Fatalf("step %d at %d ms: state %v, want %v", i, st.At, got, st.State)
				}
			}
		})
	}
}

// TestProbeNumUnderConcurrency releases many goroutines at a breaker whose
// retry time has come, many rounds over: exactly probeNum pass each time.
func TestProbeNumUnderConcurrency(t *testing.T) {
	for _, probes := range []int64{1, 3, 10} {
		rule := config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorCount, Threshold: 0,
			StatIntervalMs: 1000, RetryTimeoutMs: 100, ProbeNum: probes}
		s := compile(t, []config.DegradeRule{rule}, nil, nil)
		bs := s.For("r")
		run(bs, []call{{0, 0, true}})

		const goroutines, rounds = 64, 30
		now := int64(0)
		for round := 0; round < rounds; round++ {
			now += 100 * ms // the breaker is open until now
			passed := enterAtOnce(bs, now, goroutines)
			if int64(len(passed)) != probes {
				t.Fatalf("probeNum %d, round %d: %d calls passed a half-open breaker", probes, round, len(passed))
			}
			// All but the last succeed: still half-open; the last fails.
			for i := range passed[:len(passed)-1] {
				passed[i].Exit(now, time.Millisecond, 200)
			}
			if got := s.States()["r"]; got != circuit.HalfOpen {
				t.Fatalf("probeNum %d, round %d: %v with one probe out, want half-open", probes, round, got)
			}
			passed[len(passed)-1].Exit(now, 0, 500) // open for another 100 ms
		}
	}
}
