package upstream_test

import (
	"sync"
	"testing"
	"time"

	"sluice/upstream"
)

// TestRetryAfterItsFailureEjected: the failure a retry answers may be
// the one that ejects its target. When that leaves no target available
// (panic mode), the retry goes to another target than the one that just
// failed, as in every panic-mode round; it used to be chosen before the
// ejection, and so went back to the target just ejected.
func TestRetryAfterItsFailureEjected(t *testing.T) {
	p, u := build(t, upstream.Spec{Targets: targets(2), Retries: 1, RetryBudget: 0.2,
		Passive: &upstream.Passive{ConsecutiveFailures: 1, EjectFor: 10 * time.Second, MaxEjectedPercent: 100}}, nil)
	// Target 0 fails once: ejected.
	for {
		var tr upstream.Tries
		i := u.Pick(0, 0, false, &tr)
		if i == 0 {
			u.Done(0, &tr, 503, upstream.Failure)
			break
		}
		u.Done(0, &tr, 200, upstream.Success)
	}
	if byTarget(p, sec)[targets(2)[0].URL].Available {
		t.Fatal("target 0 not ejected")
	}
	var tr upstream.Tries
	if i := u.Pick(sec, 0, false, &tr); i != 1 {
		t.Fatalf("first attempt to target %d, want 1 (the only one available)", i)
	}
	j := u.Retry(sec, 0, false, &tr, 503)
	if byTarget(p, sec)[targets(2)[1].URL].Available {
		t.Fatal("target 1 not ejected by its failure")
	}
	if j != 0 {
		t.Errorf("retry to target %d, the one just failed and ejected; want 0 (panic mode: another)", j)
	}
	u.Done(sec, &tr, 200, upstream.Success)
}

// TestAbandonedAnswerCounted: an attempt the target answered, whose
// client left while the answer streamed (every long poll or event stream
// ends so), is an attempt sent to the target: counted in the metrics
// (Answered) and so in the API's requestsPerSecond too.
func TestAbandonedAnswerCounted(t *testing.T) {
	obs := newCounting()
	p, u := build(t, upstream.Spec{Targets: targets(1)}, obs)
	for range 3 {
		var tr upstream.Tries
		u.Pick(0, 0, false, &tr)
		u.Done(0, &tr, 200, upstream.Abandoned)
	}
	// A client that left before any answer: no attempt answered.
	var tr upstream.Tries
	u.Pick(0, 0, false, &tr)
	u.Done(0, &tr, 0, upstream.Abandoned)

	url := targets(1)[0].URL
	metrics := obs.answered[url][200]
	st := byTarget(p, 0)[url]
	if metrics != 3 || st.RequestsPerSecond != float64(metrics) {
		t.Errorf("metrics count %d answered attempts, the API %v per second over the last second; want 3 and 3",
			metrics, st.RequestsPerSecond)
	}
	if st.ErrorsPerSecond != 0 || st.InFlight != 0 {
		t.Errorf("%v errors/s, %d in flight; want 0, 0", st.ErrorsPerSecond, st.InFlight)
	}
}

// TestMaxEjectedPercentConcurrent: many goroutines failing on every
// target at once never eject more than maxEjectedPercent of them, and
// leave nothing in flight.
func TestMaxEjectedPercentConcurrent(t *testing.T) {
	for range 20 {
		obs := newCounting()
		p, u := build(t, upstream.Spec{Targets: targets(5), Retries: 2, RetryBudget: 0.2,
			Passive: &upstream.Passive{ConsecutiveFailures: 1, EjectFor: 10 * time.Second, MaxEjectedPercent: 40}}, obs)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range 50 {
					now := int64(g*50+n) * int64(time.Millisecond)
					var tr upstream.Tries
					u.Pick(now, 0, false, &tr)
					for u.Retry(now, 0, false, &tr, 503) >= 0 {
					}
					u.Done(now, &tr, 503, upstream.Failure)
				}
			}()
		}
		wg.Wait()
		ejected := 0
		for _, st := range byTarget(p, sec) {
			if st.Ejected {
				ejected++
			}
			if st.InFlight != 0 {
				t.Fatalf("%s: %d in flight", st.URL, st.InFlight)
			}
		}
		total := 0
		for _, n := range obs.ejected {
			total += n
		}
		if ejected != 2 || total != 2 {
			t.Fatalf("%d ejected now, %d ejections; want 2 (40%% of 5)", ejected, total)
		}
	}
}

// TestRetryBudgetConcurrent: 100 requests in flight whose first
// attempts fail at once get at most 20% of them (20) retries in flight,
// however their Retry calls interleave; every place is given back.
func TestRetryBudgetConcurrent(t *testing.T) {
	obs := newCounting()
	p, u := build(t, upstream.Spec{Targets: targets(4), Retries: 3, RetryBudget: 0.2}, obs)
	const n = 100
	trs := make([]upstream.Tries, n)
	for i := range trs {
		u.Pick(0, 0, false, &trs[i])
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	got := make([]bool, n)
	for i := range trs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got[i] = u.Retry(0, 0, false, &trs[i], 503) >= 0
		}()
	}
	close(start)
	wg.Wait()
	retrying := 0
	for _, ok := range got {
		if ok {
			retrying++
		}
	}
	// At most 20, never more. Not exactly 20: a Retry records its failed
	// attempt (out of flight) before its new one begins, so a concurrent
	// Retry may see 99 in flight and a budget of 19.
	if retrying > 20 || retrying < 10 {
		t.Errorf("%d retries in flight of %d attempts, want at most 20 (and most of them)", retrying, n)
	}
	// A retry retried again keeps its place; a new one is refused.
	for i := range trs {
		if got[i] && u.Retry(0, 0, false, &trs[i], 503) < 0 {
			t.Errorf("request %d: its retry could not be retried in its own place", i)
		}
	}
	for i := range trs {
		u.Done(0, &trs[i], 200, upstream.Success)
	}
	// Every place given back: 3 retries one after another all succeed.
	for range 3 {
		var tr upstream.Tries
		u.Pick(sec, 0, false, &tr)
		if u.Retry(sec, 0, false, &tr, 503) < 0 {
			t.Error("a retry refused once everything ended")
		}
		u.Done(sec, &tr, 200, upstream.Success)
	}
	for _, st := range byTarget(p, sec) {
		if st.InFlight != 0 {
			t.Errorf("%s: %d in flight", st.URL, st.InFlight)
		}
	}
}

// TestUpstreamRequestsWithoutRetries: an upstream that does not retry
// shows the requests it gets too (each sent once: its targets' attempts),
// not 0 while traffic flows; one that retries shows client requests
// (not attempts) and its retries.
func TestUpstreamRequestsWithoutRetries(t *testing.T) {
	for _, c := range []struct {
		retries           int
		requests, retried float64
	}{
		{0, 4, 0},     // 4 requests, 2 of them failed: 4 attempts
		{1, 0.4, 0.2}, // 4 requests, 2 of them retried, over the 10 s window
	} {
		p, u := build(t, upstream.Spec{Targets: targets(2), Retries: c.retries}, newCounting())
		for i := range 4 {
			var tr upstream.Tries
			u.Pick(0, 0, false, &tr)
			if i%2 == 1 && c.retries > 0 && u.Retry(0, 0, false, &tr, 502) < 0 {
				t.Fatal("the retry was refused")
			}
			u.Done(0, &tr, 200, upstream.Success)
		}
		st := p.Status(0)[0]
		if st.RequestsPerSecond != c.requests || st.RetriesPerSecond != c.retried {
			t.Errorf("retries %d: the upstream shows %v requests and %v retries per second, want %v and %v",
				c.retries, st.RequestsPerSecond, st.RetriesPerSecond, c.requests, c.retried)
		}
	}
}
