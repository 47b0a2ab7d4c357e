package upstream_test

import (
	"testing"
	"time"

	"sluice/upstream"
)

// TestEjectionTakesTargetOut: consecutiveFailures failures in a row eject a
// target for ejectFor: no request goes to it until then, and it is counted.
func TestEjectionTakesTargetOut(t *testing.T) {
	obs := newCounting()
	p, u := build(t, upstream.Spec{Targets: targets(2),
		Passive: &upstream.Passive{ConsecutiveFailures: 3, EjectFor: 10 * time.Second, MaxEjectedPercent: 50}}, obs)
	bad := targets(2)[0].URL
	// Target 0 fails every time, target 1 never: successes elsewhere do
	// not break target 0's run.
	for n := 0; n < 3; {
		var tried upstream.Set
		if i := u.Pick(0, 0, false, &tried); i == 0 {
			u.Done(0, i, 0, upstream.Failure)
			n++
		} else {
			u.Done(0, i, 200, upstream.Success)
		}
	}
	if obs.ejected[bad] != 1 {
		t.Fatalf("ejections of %s: %d, want 1", bad, obs.ejected[bad])
	}
	st := byTarget(p, sec)[bad]
	if !st.Ejected || st.Available || st.EjectedUntil != 10*sec {
		t.Fatalf("status after ejection: %+v; want ejected until 10s", st)
	}
	for now := sec; now < 10*sec; now += sec / 10 {
		if i := pick(u, now, 200); i == 0 {
			t.Fatalf("request sent to the ejected target at %v", time.Duration(now))
		}
	}
	seen := false
	for range 4 {
		seen = seen || pick(u, 10*sec, 200) == 0
	}
	if !seen {
		t.Fatal("target not back after its ejection ended")
	}
}

// TestMaxEjectedPercent: 4 targets, 50%: at most 2 are ejected at once,
// however many fail.
func TestMaxEjectedPercent(t *testing.T) {
	obs := newCounting()
	p, u := build(t, upstream.Spec{Targets: targets(4),
		Passive: &upstream.Passive{ConsecutiveFailures: 1, EjectFor: 10 * time.Second, MaxEjectedPercent: 50}}, obs)
	for range 100 {
		pick(u, 0, 503)
	}
	ejected := 0
	for _, st := range byTarget(p, 0) {
		if st.Ejected {
			ejected++
		}
	}
	if ejected != 2 || len(obs.ejected) != 2 {
		t.Fatalf("%d targets ejected (%d counted), want 2", ejected, len(obs.ejected))
	}
	// With 0% nothing is ever ejected.
	p, u = build(t, upstream.Spec{Targets: targets(2),
		Passive: &upstream.Passive{ConsecutiveFailures: 1, EjectFor: time.Second, MaxEjectedPercent: 0}}, nil)
	for range 10 {
		pick(u, 0, 0)
	}
	for url, st := range byTarget(p, 0) {
		if st.Ejected {
			t.Fatalf("%s ejected with maxEjectedPercent 0", url)
		}
	}
}

// TestPanicMode: when no target is available (here both ejected, 100%
// allowed), every target gets traffic again; each such request is counted.
func TestPanicMode(t *testing.T) {
	obs := newCounting()
	_, u := build(t, upstream.Spec{Targets: targets(2),
		Passive: &upstream.Passive{ConsecutiveFailures: 1, EjectFor: 10 * time.Second, MaxEjectedPercent: 100}}, obs)
	pick(u, 0, 0)
	pick(u, 0, 0)
	got := map[int]int{}
	for range 10 {
		got[pick(u, sec, 200)]++
	}
	if got[0] == 0 || got[1] == 0 || obs.panics != 10 {
		t.Fatalf("panic mode: picks %v, %d counted; want both targets used, 10 counted", got, obs.panics)
	}
	pick(u, 10*sec, 200)
	if obs.panics != 10 {
		t.Fatalf("still counted as panic after the ejections ended")
	}
}

// TestRetryGoesElsewhere: a retry never goes to a target the request
// tried, stops after Retries retries, and skips unavailable targets unless
// none is available.
func TestRetryGoesElsewhere(t *testing.T) {
	_, u := build(t, upstream.Spec{Targets: targets(3), Retries: 5, RetryBudget: 1}, nil)
	var tried upstream.Set
	seen := map[int]bool{}
	for i := u.Pick(0, 0, false, &tried); i >= 0; i = u.Retry(0, 0, false, &tried) {
		if seen[i] {
			t.Fatalf("target %d tried twice", i)
		}
		seen[i] = true
		u.Done(0, i, 503, upstream.Failure)
	}
	if len(seen) != 3 {
		t.Fatalf("tried %d targets, want all 3", len(seen))
	}

	_, u = build(t, upstream.Spec{Targets: targets(3), Retries: 1, RetryBudget: 1}, nil)
	tried = upstream.Set{}
	i := u.Pick(0, 0, false, &tried)
	u.Done(0, i, 0, upstream.Failure)
	j := u.Retry(0, 0, false, &tried)
	u.Done(0, j, 0, upstream.Failure)
	if j < 0 || u.Retry(0, 0, false, &tried) != -1 {
		t.Fatal("retries: 1 allowed other than one retry")
	}
}

// TestRetryBudget: with every attempt failing, retries stay within share x
// requests of the last 10 s plus the floor of 3 a second (3 in hand at the
// start), at any request rate.
func TestRetryBudget(t *testing.T) {
	for _, rate := range []int64{1, 10, 100, 1000} {
		obs := newCounting()
		_, u := build(t, upstream.Spec{Targets: targets(2), Retries: 3, RetryBudget: 0.2}, obs)
		const seconds = 8
		step := sec / rate
		requests := int64(0)
		for now := int64(0); now < seconds*sec; now += step {
			requests++
			var tried upstream.Set
			for i := u.Pick(now, 0, false, &tried); i >= 0; i = u.Retry(now, 0, false, &tried) {
				u.Done(now, i, 503, upstream.Failure)
			}
			if limit := 0.2*float64(requests) + 3*float64(now)/1e9 + 3; float64(obs.retries) > limit {
				t.Fatalf("rate %d/s at %v: %d retries for %d requests, over %.1f", rate, time.Duration(now), obs.retries, requests, limit)
			}
		}
		// And the budget is used, not refused: at least the share (minus a
		// bucket's rounding) or the floor.
		if min := min(0.2*float64(requests)*0.9, 3*seconds); float64(obs.retries) < min {
			t.Errorf("rate %d/s: only %d retries for %d requests, want >= %.0f", rate, obs.retries, requests, min)
		}
	}
}

// TestPanicShownOnlyWhileNoTargetIsAvailable: the status (the API, the
// dashboard's badge) says panic while no target is available, and stops
// saying it once one is, whether or not a request came since.
func TestPanicShownOnlyWhileNoTargetIsAvailable(t *testing.T) {
	p, u := build(t, upstream.Spec{Targets: targets(2),
		Passive: &upstream.Passive{ConsecutiveFailures: 1, EjectFor: 10 * time.Second, MaxEjectedPercent: 100}}, nil)
	pick(u, 0, 0)
	pick(u, 0, 0)
	pick(u, sec, 200) // in panic mode
	if !p.Status(sec)[0].Panic {
		t.Fatal("no target available, yet the status does not say panic")
	}
	if p.Status(20 * sec)[0].Panic {
		t.Fatal("the ejections are over and both targets are available, yet the status still says panic")
	}
}
