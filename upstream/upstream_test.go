package upstream_test

import (
	"slices"
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
		var tried upstream.Tries
		if i := u.Pick(0, 0, false, &tried); i == 0 {
			u.Done(0, &tried, 0, upstream.Failure)
			n++
		} else {
			u.Done(0, &tried, 200, upstream.Success)
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

// eject makes target k of u unavailable: requests are picked (and
// answered 200) until one goes to k, which fails. u's Passive must eject
// on one failure.
func eject(t *testing.T, u *upstream.Upstream, k int) {
	t.Helper()
	for range 1000 {
		var tr upstream.Tries
		if u.Pick(0, 0, false, &tr) == k {
			u.Done(0, &tr, 503, upstream.Failure)
			return
		}
		u.Done(0, &tr, 200, upstream.Success)
	}
	t.Fatalf("target %d never picked", k)
}

// TestRetryOrder: a retry goes to an available target the request has not
// tried while there is one, then to available ones it tried (so retries
// may outnumber the other targets), going round them: never twice in a row
// to one target while another may be tried. It skips unavailable targets
// unless none is available (panic mode), and stops after Retries retries.
func TestRetryOrder(t *testing.T) {
	cases := []struct {
		name    string
		targets int
		retries int
		ejected []int // made unavailable first
		percent int   // maxEjectedPercent: room for ejected, none more
		want    string
	}{
		// n: a target the request had not tried; a: one it had.
		{"two targets, retries 2", 2, 2, nil, 0, "nna"},
		{"two targets, retries 4", 2, 4, nil, 0, "nnaaa"},
		{"three targets, retries 5", 3, 5, nil, 0, "nnnaaa"},
		{"one target, retries 2", 1, 2, nil, 0, "naa"},
		{"three targets, retries 1", 3, 1, nil, 0, "nn"},
		{"an ejected target is skipped, tried ones again", 3, 3, []int{2}, 34, "nnaa"},
		{"none available: untried first, then tried", 2, 3, []int{0, 1}, 100, "nnaa"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := upstream.Spec{Targets: targets(c.targets), Retries: c.retries, RetryBudget: 1}
			if c.ejected != nil {
				s.Passive = &upstream.Passive{ConsecutiveFailures: 1, EjectFor: time.Hour, MaxEjectedPercent: c.percent}
			}
			_, u := build(t, s, nil)
			for _, k := range c.ejected {
				eject(t, u, k)
			}
			var tr upstream.Tries
			got, seq := "", []int{}
			for i := u.Pick(0, 0, false, &tr); i >= 0; i = u.Retry(0, 0, false, &tr, 503) {
				if tr.Current() != i {
					t.Fatalf("attempt in progress %d, want %d", tr.Current(), i)
				}
				if slices.Contains(seq, i) {
					got += "a"
				} else {
					got += "n"
				}
				seq = append(seq, i)
				if len(seq) > 1 && i == seq[len(seq)-2] && c.targets > 1 {
					t.Errorf("attempt %d went to target %d again, the one that just failed (targets %v)", len(seq), i, seq)
				}
				if len(c.ejected) == 1 && i == c.ejected[0] {
					t.Errorf("attempt %d went to target %d, ejected, while others are available", len(seq), i)
				}
			}
			u.Done(0, &tr, 503, upstream.Failure)
			if got != c.want || tr.Sent() != len(c.want) {
				t.Errorf("attempts %q (targets %v, %d sent), want %q", got, seq, tr.Sent(), c.want)
			}
		})
	}
}

// TestRetryBudget: retries in flight are at most retryBudget x the
// requests in flight to the upstream (retries included), and 3 are always
// allowed, whatever the rate; a retry that fails and is retried again
// keeps its one place; a finished retry gives its place back.
func TestRetryBudget(t *testing.T) {
	cases := []struct {
		name     string
		share    float64
		plain    int  // requests in flight on their first attempt
		retrying int  // requests in flight on a retry
		again    bool // the request asking is itself on a retry
		want     bool
	}{
		{"alone", 0.2, 0, 0, false, true},
		{"quiet, 2 retries in flight", 0.2, 0, 2, false, true},
		{"quiet, 3 retries in flight", 0.2, 0, 3, false, false},
		{"share 0, 2 in flight", 0, 0, 2, false, true},
		{"share 0, 3 in flight", 0, 0, 3, false, false},
		{"share 0, 3 in flight, one of them asks again", 0, 0, 2, true, true},
		// 100 in flight with the asking request: 20 retries may be.
		{"busy, 19 of 100", 0.2, 80, 19, false, true},
		{"busy, 20 of 100", 0.2, 79, 20, false, false},
		{"busy, 20 of 100, one of them asks again", 0.2, 80, 19, true, true},
		{"busy, 5 of 20", 0.2, 14, 5, false, false},
		{"share 1", 1, 0, 10, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, u := build(t, upstream.Spec{Targets: targets(2), Retries: 3, RetryBudget: c.share}, nil)
			// Room to set up: 200 extra requests in flight while the
			// retries start, finished before the question.
			extra := make([]upstream.Tries, 200)
			for i := range extra {
				u.Pick(0, 0, false, &extra[i])
			}
			plain := make([]upstream.Tries, c.plain)
			for i := range plain {
				u.Pick(0, 0, false, &plain[i])
			}
			retrying := make([]upstream.Tries, c.retrying)
			for i := range retrying {
				u.Pick(0, 0, false, &retrying[i])
				if u.Retry(0, 0, false, &retrying[i], 503) < 0 {
					t.Fatalf("setup: retry %d refused", i)
				}
			}
			for i := range extra {
				u.Done(0, &extra[i], 200, upstream.Success)
			}
			var ask upstream.Tries
			if c.again {
				// One of the retries in flight fails and asks for another.
				ask = retrying[len(retrying)-1]
				retrying = retrying[:len(retrying)-1]
			} else {
				u.Pick(0, 0, false, &ask)
			}
			may := u.MayRetry(0, &ask)
			got := u.Retry(0, 0, false, &ask, 503) >= 0
			if got != c.want || may != c.want {
				t.Errorf("retry allowed %v (MayRetry %v), want %v", got, may, c.want)
			}
			// Every place is given back when the retries end.
			u.Done(0, &ask, 200, upstream.Success)
			for i := range retrying {
				u.Done(0, &retrying[i], 200, upstream.Success)
			}
			for i := range plain {
				u.Done(0, &plain[i], 200, upstream.Success)
			}
			for i := range 3 {
				var tr upstream.Tries
				u.Pick(0, 0, false, &tr)
				if u.Retry(0, 0, false, &tr, 503) < 0 {
					t.Fatalf("after every request ended, retry %d of 3 refused: a place was not given back", i+1)
				}
				defer u.Done(0, &tr, 200, upstream.Success)
			}
		})
	}
}

// TestRetryBudgetAtLowTraffic: requests one after another, each failing
// on both targets, are each retried: a quiet upstream gets every retry
// (a rate-based budget would refuse most after the first few).
func TestRetryBudgetAtLowTraffic(t *testing.T) {
	obs := newCounting()
	_, u := build(t, upstream.Spec{Targets: targets(2), Retries: 1, RetryBudget: 0.2}, obs)
	const n = 1000
	for k := range n {
		now := int64(k) * sec / 10 // 10 requests a second
		var tr upstream.Tries
		u.Pick(now, 0, false, &tr)
		for u.Retry(now, 0, false, &tr, 503) >= 0 {
		}
		u.Done(now, &tr, 503, upstream.Failure)
	}
	if obs.retries != n {
		t.Errorf("%d retries for %d requests one at a time, want every one retried", obs.retries, n)
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
