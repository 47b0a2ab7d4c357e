package circuit_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter"
	"sluice/limiter/circuit"
)

const ms = int64(time.Millisecond)

// transitions records onChange calls as "resource: from->to".
type transitions struct {
	mu  sync.Mutex
	got []string
}

func (tr *transitions) record(res string, from, to circuit.State) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.got = append(tr.got, fmt.Sprintf("%s: %s->%s", res, from, to))
}

func (tr *transitions) list() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.got, ", ")
}

func compile(t *testing.T, rules []config.DegradeRule, prev *circuit.Set, tr *transitions) *circuit.Set {
	t.Helper()
	var fn func(string, circuit.State, circuit.State)
	if tr != nil {
		fn = tr.record
	}
	s := circuit.Compile(defaulted(rules...), prev, fn)
	s.Install()
	return s
}

// defaulted gives rules built here config's defaults, as config.Load gives
// a file's rules (circuit takes rules as they are), but keeps minRequestAmount:
// these tests write 0 for "no minimum", which Defaults reads as left out.
func defaulted(rules ...config.DegradeRule) []config.DegradeRule {
	cfg := config.Config{DegradeRules: slices.Clone(rules)}
	config.Defaults(&cfg)
	for i := range rules {
		cfg.DegradeRules[i].MinRequestAmount = rules[i].MinRequestAmount
	}
	return cfg.DegradeRules
}

// call is one request: it enters at ms At, takes RtMs and completes.
type call struct {
	At     int64
	RtMs   int64
	Failed bool
}

// run sends calls through bs and returns how many were blocked.
func run(bs *circuit.Breakers, calls []call) (blocked int) {
	for _, c := range calls {
		tok, v := bs.Enter(c.At * ms)
		if v.Blocked {
			blocked++
			continue
		}
		tok.Exit((c.At+c.RtMs)*ms, time.Duration(c.RtMs)*time.Millisecond, statusOf(c.Failed))
	}
	return blocked
}

// calls builds n calls 1 ms apart from at, the last bad ones slow/failed (so
// that the trip condition is checked on the whole sequence).
func calls(at int64, n, bad int, slow bool) []call {
	var cs []call
	for i := 0; i < n; i++ {
		c := call{At: at + int64(i), RtMs: 10}
		if i >= n-bad {
			if slow {
				c.RtMs = 500
			} else {
				c.Failed = true
			}
		}
		cs = append(cs, c)
	}
	return cs
}

func TestTrip(t *testing.T) {
	slow := config.DegradeRule{Resource: "r", Strategy: config.DegradeSlowRatio, MaxAllowedRtMs: 100,
		Threshold: 0.5, StatIntervalMs: 1000, MinRequestAmount: 5, RetryTimeoutMs: 5000}
	errRatio := slow
	errRatio.Strategy = config.DegradeErrorRatio
	errCount := slow
	errCount.Strategy = config.DegradeErrorCount
	errCount.Threshold = 2
	with := func(r config.DegradeRule, f func(*config.DegradeRule)) config.DegradeRule { f(&r); return r }

	tests := []struct {
		name  string
		rule  config.DegradeRule
		calls []call
		want  circuit.State
	}{
		{"slowRatio above threshold", slow, calls(0, 5, 3, true), circuit.Open},
		{"slowRatio at threshold stays closed", slow, calls(0, 6, 3, true), circuit.Closed},
		{"slowRatio threshold 1 trips when all are slow", with(slow, func(r *config.DegradeRule) { r.Threshold = 1 }), calls(0, 5, 5, true), circuit.Open},
		{"slowRatio threshold 1 holds while one is fast", with(slow, func(r *config.DegradeRule) { r.Threshold = 1 }), calls(0, 5, 4, true), circuit.Closed},
		{"slowRatio ignores failures", slow, calls(0, 5, 5, false), circuit.Closed},
		{"slowRatio rt equal to max is not slow", slow, []call{{0, 100, false}, {1, 100, false}, {2, 100, false}, {3, 100, false}, {4, 100, false}}, circuit.Closed},
		{"errorRatio above threshold", errRatio, calls(0, 5, 3, false), circuit.Open},
		{"errorRatio at threshold stays closed", errRatio, calls(0, 6, 3, false), circuit.Closed},
		{"errorRatio ignores slowness", errRatio, calls(0, 5, 5, true), circuit.Closed},
		{"errorRatio threshold 1 trips when all fail", with(errRatio, func(r *config.DegradeRule) { r.Threshold = 1 }), calls(0, 5, 5, false), circuit.Open},
		{"errorCount above threshold", errCount, calls(0, 5, 3, false), circuit.Open},
		{"errorCount at threshold stays closed", errCount, calls(0, 5, 2, false), circuit.Closed},
		{"minRequestAmount holds closed on little traffic", with(errRatio, func(r *config.DegradeRule) { r.MinRequestAmount = 10 }), calls(0, 9, 9, false), circuit.Closed},
		{"minRequestAmount reached trips", with(errRatio, func(r *config.DegradeRule) { r.MinRequestAmount = 10 }), calls(0, 10, 10, false), circuit.Open},
		{"errors spread wider than the window do not add up", errCount,
			[]call{{0, 1, true}, {600, 1, true}, {1200, 1, true}, {1201, 1, false}, {1202, 1, false}}, circuit.Closed},
		{"errors within the window add up", errCount,
			[]call{{0, 1, true}, {300, 1, true}, {600, 1, true}, {601, 1, false}, {602, 1, false}}, circuit.Open},
		{"negative instants work", errCount, calls(-1_000_000, 5, 3, false), circuit.Open},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := compile(t, []config.DegradeRule{tt.rule}, nil, nil)
			run(s.For("r"), tt.calls)
			if got := s.States()["r"]; got != tt.want {
				t.Errorf("state = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOpenHalfOpenProbe(t *testing.T) {
	rule := config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorRatio, Threshold: 0.5,
		StatIntervalMs: 1000, MinRequestAmount: 2, RetryTimeoutMs: 5000}
	tr := &transitions{}
	s := compile(t, []config.DegradeRule{rule}, nil, tr)
	bs := s.For("r")

	// Trip at t=10ms (the second failure completes there).
	run(bs, []call{{0, 5, true}, {5, 5, true}})
	if got := s.States()["r"]; got != circuit.Open {
		t.Fatalf("after two failures: %v, want open", got)
	}

	steps := []struct {
		name      string
		at        int64 // ms
		wantBlock bool
		wantRetry time.Duration
	}{
		{"just opened", 10, true, 5000 * time.Millisecond},
		{"half-way", 2510, true, 2500 * time.Millisecond},
		{"1 ms before retry", 5009, true, time.Millisecond},
	}
	for _, st := range steps {
		_, v := bs.Enter(st.at * ms)
		if v.Blocked != st.wantBlock || v.RetryAfter != st.wantRetry || v.Reason != limiter.ReasonDegrade {
			t.Errorf("%s: verdict %+v, want blocked=%v reason=degrade retryAfter=%v", st.name, v, st.wantBlock, st.wantRetry)
		}
	}

	// Retry time reached: one probe passes, the next call is blocked while it is out.
	probe, v := bs.Enter(5010 * ms)
	if v.Blocked {
		t.Fatalf("probe blocked: %+v", v)
	}
	// The probe's outcome says when: no RetryAfter (it said 1 ms, and a
	// client that came back a second later was refused again while a slow
	// probe was out).
	if _, v := bs.Enter(5011 * ms); !v.Blocked || v.RetryAfter != 0 {
		t.Fatalf("second call during probe: %+v, want blocked with no RetryAfter", v)
	}
	if got := s.States()["r"]; got != circuit.HalfOpen {
		t.Fatalf("during probe: %v, want half-open", got)
	}

	// The probe fails: open again for a whole retryTimeoutMs from then.
	probe.Exit(5100*ms, 90*time.Millisecond, 500)
	if _, v := bs.Enter(5100 * ms); !v.Blocked || v.RetryAfter != 5000*time.Millisecond {
		t.Fatalf("after failed probe: %+v, want blocked for 5s", v)
	}
	if _, v := bs.Enter(10099 * ms); !v.Blocked {
		t.Fatalf("before second retry: %+v, want blocked", v)
	}

	// Second probe succeeds: closed, with an empty window (one more failure
	// does not trip, although the old window held two).
	probe, v = bs.Enter(10100 * ms)
	if v.Blocked {
		t.Fatalf("second probe blocked: %+v", v)
	}
	probe.Exit(10110*ms, 10*time.Millisecond, 200)
	if got := s.States()["r"]; got != circuit.Closed {
		t.Fatalf("after good probe: %v, want closed", got)
	}
	if n := run(bs, []call{{10200, 5, false}, {10300, 5, false}, {10400, 5, true}}); n != 0 {
		t.Fatalf("after close: %d blocked, want 0", n)
	}
	if got := s.States()["r"]; got != circuit.Closed {
		t.Fatalf("one failure in three after close: %v, want closed", got)
	}

	want := "r: closed->open, r: open->half-open, r: half-open->open, r: open->half-open, r: half-open->closed"
	if got := tr.list(); got != want {
		t.Errorf("transitions:\n got %s\nwant %s", got, want)
	}
}

func TestSlowRatioProbe(t *testing.T) {
	rule := config.DegradeRule{Resource: "r", Strategy: config.DegradeSlowRatio, MaxAllowedRtMs: 100,
		Threshold: 0.5, MinRequestAmount: 1, RetryTimeoutMs: 1000}
	tests := []struct {
		name   string
		rtMs   int64
		failed bool
		want   circuit.State
	}{
		{"slow probe re-opens", 101, false, circuit.Open},
		{"fast failed probe re-opens", 1, true, circuit.Open},
		{"fast good probe closes", 100, false, circuit.Closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := compile(t, []config.DegradeRule{rule}, nil, nil)
			bs := s.For("r")
			run(bs, []call{{0, 500, false}}) // statIntervalMs defaults to 1 s
			probe, v := bs.Enter(1500 * ms)
			if v.Blocked {
				t.Fatalf("probe blocked: %+v", v)
			}
			probe.Exit((1500+tt.rtMs)*ms, time.Duration(tt.rtMs)*time.Millisecond, statusOf(tt.failed))
			if got := s.States()["r"]; got != tt.want {
				t.Errorf("state %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCancelGivesProbeBack(t *testing.T) {
	rule := config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorCount, Threshold: 0,
		StatIntervalMs: 1000, RetryTimeoutMs: 1000}
	tr := &transitions{}
	s := compile(t, []config.DegradeRule{rule}, nil, tr)
	bs := s.For("r")
	run(bs, []call{{0, 1, true}})

	probe, v := bs.Enter(2000 * ms)
	if v.Blocked {
		t.Fatalf("probe blocked")
	}
	probe.Cancel(2000 * ms)
	probe.Cancel(2000 * ms) // a second Cancel does nothing
	probe.Exit(2000*ms, 0, 500)
	if got := s.States()["r"]; got != circuit.HalfOpen {
		t.Fatalf("after cancel: %v, want half-open", got)
	}
	probe2, v := bs.Enter(2001 * ms)
	if v.Blocked {
		t.Fatalf("call after a cancelled probe blocked: %+v", v)
	}
	if _, v := bs.Enter(2002 * ms); !v.Blocked {
		t.Fatalf("a second probe passed")
	}
	probe2.Exit(2010*ms, time.Millisecond, 200)
	want := "r: closed->open, r: open->half-open, r: half-open->closed"
	if got := tr.list(); got != want {
		t.Errorf("transitions:\n got %s\nwant %s", got, want)
	}
}

// TestOneProbeUnderConcurrency releases many goroutines at a breaker whose
// retry time has come, many rounds over: exactly one may pass each time.
func TestOneProbeUnderConcurrency(t *testing.T) {
	rule := config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorCount, Threshold: 0,
		StatIntervalMs: 1000, RetryTimeoutMs: 100}
	tr := &transitions{}
	s := compile(t, []config.DegradeRule{rule}, nil, tr)
	bs := s.For("r")
	run(bs, []call{{0, 0, true}})

	const goroutines, rounds = 64, 50
	now := int64(0)
	for round := 0; round < rounds; round++ {
		now += 100 * ms // the breaker is open until now
		passed := enterAtOnce(bs, now, goroutines)
		if len(passed) != 1 {
			t.Fatalf("round %d: %d calls passed a half-open breaker, want exactly 1", round, len(passed))
		}
		passed[0].Exit(now, 0, 500) // fail: open for another 100 ms
	}
	if got := strings.Count(tr.list(), "open->half-open"); got != rounds {
		t.Errorf("%d open->half-open transitions reported, want %d", got, rounds)
	}
}

// enterAtOnce releases n goroutines at bs together at now, and returns the
// tokens of the calls that passed.
func enterAtOnce(bs *circuit.Breakers, now int64, n int) []circuit.Token {
	var (
		start  = make(chan struct{})
		wg     sync.WaitGroup
		mu     sync.Mutex
		passed []circuit.Token
	)
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tok, v := bs.Enter(now)
			if !v.Blocked {
				mu.Lock()
				passed = append(passed, tok)
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	return passed
}

func TestSeveralRulesOneResource(t *testing.T) {
	short := config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorCount, Threshold: 0,
		StatIntervalMs: 1000, RetryTimeoutMs: 1000}
	long := short
	long.RetryTimeoutMs = 5000
	s := compile(t, []config.DegradeRule{short, long}, nil, nil)
	bs := s.For("r")
	run(bs, []call{{0, 0, true}}) // trips both

	// The short breaker grants its probe, the long one blocks: the probe must
	// be given back, and the verdict carries the long breaker's time left.
	_, v := bs.Enter(2000 * ms)
	if !v.Blocked || v.RetryAfter != 3000*time.Millisecond {
		t.Fatalf("at 2s: %+v, want blocked for 3s", v)
	}
	tok, v := bs.Enter(5000 * ms)
	if v.Blocked {
		t.Fatalf("at 5s both breakers should let the probe through: %+v", v)
	}
	tok.Exit(5001*ms, time.Millisecond, 200)
	if got := s.States()["r"]; got != circuit.Closed {
		t.Errorf("after the probe: %v, want closed", got)
	}
}

func TestCompileKeepsUnchangedRules(t *testing.T) {
	a := config.DegradeRule{Resource: "a", Strategy: config.DegradeErrorCount, Threshold: 0,
		StatIntervalMs: 1000, RetryTimeoutMs: 5000, Line: 10}
	b := a
	b.Resource = "b"
	b.Line = 20
	s1 := compile(t, []config.DegradeRule{a, b}, nil, nil)
	inFlight, _ := s1.For("a").Enter(0)
	run(s1.For("a"), []call{{0, 1, true}})
	run(s1.For("b"), []call{{0, 1, true}})

	// a moved in the file (Line changed): kept. b's threshold changed: new breaker.
	a2, b2 := a, b
	a2.Line = 30
	b2.Threshold = 3
	s2 := compile(t, []config.DegradeRule{b2, a2}, s1, nil)
	got := s2.States()
	if got["a"] != circuit.Open || got["b"] != circuit.Closed {
		t.Errorf("after reload: a=%v b=%v, want a=open b=closed", got["a"], got["b"])
	}
	if _, v := s2.For("a").Enter(1000 * ms); !v.Blocked || v.RetryAfter != 4001*time.Millisecond {
		t.Errorf("kept breaker: %+v, want blocked for 4001ms", v)
	}
	// A call that entered before the reload finishes into the kept breaker.
	inFlight.Exit(2*ms, time.Millisecond, 500)

	if s2.For("nope") != nil {
		t.Errorf("For of a resource without rules is not nil")
	}
	var none *circuit.Breakers
	if tok, v := none.Enter(0); v.Blocked {
		t.Errorf("nil Breakers blocked")
	} else {
		tok.Exit(0, 0, 500)
	}
}

func TestStatesWorstPerResource(t *testing.T) {
	trip := config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorCount, Threshold: 0,
		StatIntervalMs: 1000, RetryTimeoutMs: 1000}
	never := trip
	never.Threshold = 100
	s := compile(t, []config.DegradeRule{never, trip}, nil, nil)
	run(s.For("r"), []call{{0, 0, true}})
	if got := s.States(); got["r"] != circuit.Open || len(got) != 1 {
		t.Errorf("States = %v, want map[r:open]", got)
	}
	if got := (circuit.State(9)).String(); got != "unknown" {
		t.Errorf("State(9) = %q", got)
	}
}

func TestEnterExitAllocatesNothing(t *testing.T) {
	rule := config.DegradeRule{Resource: "r", Strategy: config.DegradeSlowRatio, MaxAllowedRtMs: 100,
		Threshold: 0.5, StatIntervalMs: 1000, MinRequestAmount: 5, RetryTimeoutMs: 1000}
	bs := compile(t, []config.DegradeRule{rule}, nil, nil).For("r")
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += ms
		tok, _ := bs.Enter(now)
		tok.Exit(now, time.Millisecond, 200)
		tok, _ = bs.Enter(now)
		tok.Cancel(now)
		tok, _ = bs.Enter(now)
		tok.Abandon(now, 200*time.Millisecond)
	})
	if allocs != 0 {
		t.Errorf("Enter+Exit allocates %v times, want 0", allocs)
	}
}

// statusOf is the status of a call that failed (500) or not (200).
func statusOf(failed bool) int {
	if failed {
		return 500
	}
	return 200
}
