package circuit_test

import (
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter/circuit"
)

// The state reported for a resource with several rules is the worst of its
// breakers: a breaker that closes while another re-opens must not read as
// closed, and a breaker moving inside an already open resource is no news.
func TestReportsResourceStateNotBreakerState(t *testing.T) {
	errs := config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorCount, Threshold: 0,
		StatIntervalMs: 1000, RetryTimeoutMs: 1000}
	slow := config.DegradeRule{Resource: "r", Strategy: config.DegradeSlowRatio, MaxAllowedRtMs: 100,
		Threshold: 0, StatIntervalMs: 1000, RetryTimeoutMs: 1000}
	var tr transitions
	s := compile(t, []config.DegradeRule{errs, slow}, nil, &tr)
	bs := s.For("r")

	run(bs, []call{{At: 0, RtMs: 500, Failed: true}}) // failed and slow: both open at 500 ms
	if got := tr.list(); got != "r: closed->open" {
		t.Fatalf("both breakers tripping: %q, want one closed->open", got)
	}
	// Both probe on one call, which is fast enough for no one but errorless:
	// the errorCount breaker closes, the slowRatio one re-opens.
	tok, v := bs.Enter(1500 * ms)
	if v.Blocked {
		t.Fatalf("at 1.5s the probe should pass both breakers: %+v", v)
	}
	tok.Exit(1900*ms, 400*time.Millisecond, 200)
	if got, want := tr.list(), "r: closed->open, r: open->half-open, r: half-open->open"; got != want {
		t.Errorf("transitions %q, want %q", got, want)
	}
	if got := s.States()["r"]; got != circuit.Open {
		t.Errorf("States = %v, want open", got)
	}
	// Only the slowRatio breaker is left to probe; a good probe closes all.
	tok, v = bs.Enter(2900 * ms)
	if v.Blocked {
		t.Fatalf("at 2.9s the probe should pass: %+v", v)
	}
	tok.Exit(2910*ms, 10*time.Millisecond, 200)
	if got, want := tr.list(), "r: closed->open, r: open->half-open, r: half-open->open, r: open->half-open, r: half-open->closed"; got != want {
		t.Errorf("transitions %q, want %q", got, want)
	}
}

// A reload that changes a resource's state reports it at once: otherwise the
// metric would stay "open" for a breaker that no longer exists.
func TestReloadReportsChangedResourceState(t *testing.T) {
	rule := func(res string) config.DegradeRule {
		return config.DegradeRule{Resource: res, Strategy: config.DegradeErrorCount, Threshold: 0,
			StatIntervalMs: 1000, RetryTimeoutMs: 5000}
	}
	kept, edited, removed := rule("kept"), rule("edited"), rule("removed")
	var tr transitions
	s1 := compile(t, []config.DegradeRule{kept, edited, removed}, nil, &tr)
	for _, res := range []string{"kept", "edited", "removed"} {
		run(s1.For(res), []call{{At: 0, RtMs: 1, Failed: true}})
	}
	before := len(tr.got)

	edited2 := edited
	edited2.Threshold = 3
	var tr2 transitions
	s2 := compile(t, []config.DegradeRule{kept, edited2, rule("new")}, s1, &tr2)
	got := map[string]bool{}
	for _, l := range tr2.got {
		got[l] = true
	}
	want := map[string]bool{"edited: open->closed": true, "removed: open->closed": true}
	if len(got) != len(want) || !got["edited: open->closed"] || !got["removed: open->closed"] {
		t.Errorf("reload reported %q, want exactly %v", tr2.got, want)
	}
	if len(tr.got) != before {
		t.Errorf("the old onChange was called after the reload: %q", tr.got[before:])
	}
	if st := s2.States(); st["kept"] != circuit.Open || st["edited"] != circuit.Closed || st["new"] != circuit.Closed {
		t.Errorf("States after reload = %v, want kept open, edited and new closed", st)
	}

	// A call that entered the old snapshot's removed breaker and finishes
	// after the reload reports nothing: the resource has no rules now.
	tr2.mu.Lock()
	tr2.got = nil
	tr2.mu.Unlock()
	tok, _ := s1.For("edited").Enter(6000 * ms) // old breaker: its probe
	tok.Exit(6001*ms, time.Millisecond, 200)
	if len(tr2.got) != 0 {
		t.Errorf("a dropped breaker's transition was reported: %q", tr2.got)
	}
	// The kept breaker reports to the new onChange.
	tok, _ = s2.For("kept").Enter(6000 * ms)
	tok.Exit(6001*ms, time.Millisecond, 200)
	if got := tr2.list(); got != "kept: open->half-open, kept: half-open->closed" {
		t.Errorf("kept breaker after reload reported %q", got)
	}
}

// A Set compiled but never installed (a reload that failed after the
// breakers were compiled) changes nothing: the resources of the Set in force
// keep their breakers, their observer and their reported state, and the
// breakers of the Set in force go on reporting to it. Install makes the
// change, and reports it.
func TestCompileChangesNothingUntilInstall(t *testing.T) {
	rule := config.DegradeRule{Resource: "r", Strategy: config.DegradeErrorCount, Threshold: 0,
		StatIntervalMs: 1000, RetryTimeoutMs: 5000}
	var tr transitions
	s1 := compile(t, []config.DegradeRule{rule}, nil, &tr)
	run(s1.For("r"), []call{{At: 0, RtMs: 1, Failed: true}})
	if got := tr.list(); got != "r: closed->open" {
		t.Fatalf("transitions %q, want r: closed->open", got)
	}

	edited := rule
	edited.Threshold = 3
	var tr2 transitions
	s2 := circuit.Compile(defaulted(edited), s1, tr2.record)
	if len(tr2.got) != 0 || tr.list() != "r: closed->open" {
		t.Errorf("Compile alone reported %q (old observer: %q), want nothing", tr2.got, tr.list())
	}
	if st := s1.States()["r"]; st != circuit.Open {
		t.Errorf("the Set in force reads %v after a Compile it did not install, want open", st)
	}
	// The breaker in force still reports to its observer.
	tok, _ := s1.For("r").Enter(6000 * ms)
	tok.Exit(6001*ms, time.Millisecond, 200)
	if got := tr.list(); got != "r: closed->open, r: open->half-open, r: half-open->closed" {
		t.Errorf("the breaker in force reported %q after an uninstalled Compile", got)
	}

	s2.Install()
	if st := s2.States()["r"]; st != circuit.Closed {
		t.Errorf("after Install: %v, want closed (the edited rule's new breaker)", st)
	}
	run(s2.For("r"), []call{{At: 7000, RtMs: 1, Failed: true}, {At: 7001, RtMs: 1, Failed: true}, {At: 7002, RtMs: 1, Failed: true}, {At: 7003, RtMs: 1, Failed: true}})
	if got := tr2.list(); got != "r: closed->open" {
		t.Errorf("the installed Set reported %q, want r: closed->open", got)
	}
}
