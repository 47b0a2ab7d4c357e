package upstream

import (
	"testing"
	"time"
)

const sec = int64(time.Second)

// TestEjectBackoff: each ejection in a row (the target failing again within
// ejectFor of coming back) lasts twice the last, up to 10x; a target that
// stays in for longer than ejectFor starts again at 1x.
func TestEjectBackoff(t *testing.T) {
	cfg := &Passive{ConsecutiveFailures: 3, EjectFor: 10 * time.Second, MaxEjectedPercent: 100}
	var p passive
	now := int64(0)
	fail := func(n int) bool {
		due := false
		for range n {
			due = p.failed(now, cfg)
		}
		return due
	}
	for i, want := range []int64{10, 20, 40, 80, 100, 100} {
		if fail(2) {
			t.Fatalf("ejection %d: due after 2 failures", i)
		}
		if !fail(1) {
			t.Fatalf("ejection %d: not due after 3 failures", i)
		}
		until := p.eject(now, cfg)
		if got := (until - now) / sec; got != want {
			t.Fatalf("ejection %d lasts %ds, want %ds", i, got, want)
		}
		// Failures while ejected count for nothing.
		if fail(5) {
			t.Fatalf("ejection %d: due while ejected", i)
		}
		now = until + sec // back, and failing again a second later
	}
	// In for longer than ejectFor: back to 1x.
	now += 11 * sec
	fail(3)
	if until := p.eject(now, cfg); until-now != 10*sec {
		t.Fatalf("after a good spell the ejection lasts %v, want 10s", time.Duration(until-now))
	}
}

// TestEjectSuccessResets: a success breaks a run of failures.
func TestEjectSuccessResets(t *testing.T) {
	cfg := &Passive{ConsecutiveFailures: 3, EjectFor: time.Second, MaxEjectedPercent: 100}
	var p passive
	p.failed(0, cfg)
	p.failed(0, cfg)
	p.succeeded(0)
	if p.failed(0, cfg) || p.failed(0, cfg) {
		t.Fatal("due after 2 failures following a success")
	}
	if !p.failed(0, cfg) {
		t.Fatal("not due after 3 failures in a row")
	}
}
