package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sluice/internal/skipped"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSystemMaxConcurrency: with system.maxConcurrency the upstream never
// has more calls in flight than the limit, however many arrive, and the
// calls beyond it are blocked with X-Sluice-Blocked: system.
func TestSystemMaxConcurrency(t *testing.T) {
	const limit = 5
	release := make(chan struct{})
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/s/hold" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		} else {
			time.Sleep(100 * time.Millisecond)
		}
		fmt.Fprint(w, "ok")
	})
	g := startGateway(t, rulesFor(up.URL, fmt.Sprintf(`
routes:
  - path: /s/*
    upstream: up
    resource: s
system:
  maxConcurrency: %d
`, limit)))

	// Hold the limit's worth of calls open, then one more is blocked.
	var wg sync.WaitGroup
	held := make([]int, limit)
	for i := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held[i] = sysStatus(g.URL + "/s/hold")
		}()
	}
	sysWaitInFlight(t, up, limit)
	resp, body := get(t, g.URL+"/s/more")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("X-Sluice-Blocked") != "system" {
		t.Errorf("call beyond maxConcurrency: %d X-Sluice-Blocked=%q, want 429 system", resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"))
	}
	if !strings.Contains(body, `"reason":"system"`) {
		t.Errorf("block body %q does not name the system reason", body)
	}
	// The guard cannot tell when a slot frees: no Retry-After promise.
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		t.Errorf("system block has Retry-After %q, want none", ra)
	}
	close(release)
	wg.Wait()
	for i, s := range held {
		if s != http.StatusOK {
			t.Errorf("held call %d got %d, want 200", i, s)
		}
	}

	// Three times the load the limit lets through (150/s x 100 ms = 15 in
	// flight wanted, 5 allowed).
	up.resetStats()
	res := run(t, load{Rate: 150, Duration: 2 * time.Second, Targets: []target{to(g.URL + "/s/slow")}})
	res.checkLag(t)
	n, maxIn := up.stats()
	st := res.statuses()
	t.Logf("statuses %v; upstream received %d, max in flight %d (limit %d)", st, n, maxIn, limit)
	if maxIn > limit {
		t.Errorf("upstream saw %d calls in flight, limit %d", maxIn, limit)
	}
	if st[http.StatusOK]+st[http.StatusTooManyRequests] != len(res.hits) {
		t.Errorf("statuses %v, want only 200 and 429", st)
	}
	if int64(st[http.StatusOK]) != n {
		t.Errorf("%d passes but the upstream received %d", st[http.StatusOK], n)
	}
	// 5 slots of 100 ms for 2 s hold ~100 calls; the limit must not starve
	// the upstream either.
	if st[http.StatusOK] < 50 || st[http.StatusTooManyRequests] == 0 {
		t.Errorf("%d passed and %d blocked, want >= 50 passed (the limit holds ~100) and some blocked", st[http.StatusOK], st[http.StatusTooManyRequests])
	}
}

// TestSystemAdaptiveBoundsLatency runs the same overload against a gateway
// without system rules and one with system.adaptive. The upstream has a fixed
// capacity (4 slots x 20 ms = 200 calls/s) and queues what it cannot serve,
// so without protection latency grows for as long as the overload lasts; the
// adaptive guard sheds what exceeds the measured capacity and the calls it
// lets through stay fast.
func TestSystemAdaptiveBoundsLatency(t *testing.T) {
	plain := sysOverload(t, "")
	adaptive := sysOverload(t, "system:\n  adaptive: true\n")
	t.Logf("no protection: %v", plain)
	t.Logf("adaptive:      %v", adaptive)
	if adaptive.p99Passed >= plain.p99Passed/2 {
		t.Errorf("adaptive p99 of passed calls %v, want < half of the unprotected %v", adaptive.p99Passed, plain.p99Passed)
	}
	// Shedding everything would also bound latency: the guard must keep
	// passing calls. It keeps the upstream's 4 slots busy (the synthetic
	// TestAdaptiveBoundsASaturatedUpstream: 90 % of its capacity or more),
	// so the bar is half of it (600 calls in the 3 s overload), leaving a
	// busy machine room.
	if adaptive.passed < 300 {
		t.Errorf("adaptive passed %d calls, want >= 300 (half the upstream's capacity)", adaptive.passed)
	}
	if adaptive.blocked == 0 {
		t.Errorf("adaptive blocked nothing under a 1.4x overload")
	}
}

type sysOverloadResult struct {
	passed, blocked, other int
	p50Passed, p99Passed   time.Duration
	p99All                 time.Duration
	upstreamMaxInFlight    int64
}

func (r sysOverloadResult) String() string {
	return fmt.Sprintf("passed %d blocked %d other %d; passed p50 %v p99 %v; all p99 %v; upstream max in flight %d",
		r.passed, r.blocked, r.other, r.p50Passed.Round(time.Millisecond), r.p99Passed.Round(time.Millisecond),
		r.p99All.Round(time.Millisecond), r.upstreamMaxInFlight)
}

// sysOverload starts an upstream of fixed capacity and a gateway with the given
// system section, warms it up below capacity (so the adaptive guard has a
// history, as a gateway in service has: 2.5 s hold a whole second of it,
// whatever the phase) and then offers 1.4x the capacity.
func sysOverload(t *testing.T, system string) sysOverloadResult {
	t.Helper()
	const (
		slots   = 4
		service = 20 * time.Millisecond // per call: capacity = slots/service = 200/s
	)
	sem := make(chan struct{}, slots)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		time.Sleep(service)
		<-sem
		fmt.Fprint(w, "ok")
	})
	g := startGateway(t, fmt.Sprintf(`upstreams:
  up:
    targets: [%q]
    timeout: 20s
routes:
  - path: /a
    upstream: up
%s`, up.URL, system))

	warm := run(t, load{Rate: 100, Duration: 2500 * time.Millisecond, Targets: []target{to(g.URL + "/a")}, MaxLag: 100 * time.Millisecond})
	warm.checkLag(t)
	if ok := warm.count(http.StatusOK); ok < len(warm.hits)*9/10 {
		msg := fmt.Sprintf("warm-up below capacity: %v, want (nearly) all 200", warm.statuses())
		// The adaptive guard sheds when more calls are in flight than the
		// last seconds' successes and fastest latency support. With one of
		// the 2 cores kept busy, scheduling delays held calls in flight and
		// it shed 19 of 150 in the warm-up: the guard reacting to a machine
		// too busy to measure this. Without system rules nothing may block.
		if system != "" && !measuringRates() {
			skipped.Skip(t, idleNeed, msg+": the adaptive guard shed in the warm-up; the machine is too busy to measure")
		}
		t.Fatal(msg)
	}
	up.resetStats()
	// Without protection up to ~250 calls queue at once: enough workers
	// that the sender never waits for an answer.
	res := run(t, load{Rate: 280, Duration: 3 * time.Second, Workers: 1000, Targets: []target{to(g.URL + "/a")}, MaxLag: 100 * time.Millisecond})
	res.checkLag(t)

	var out sysOverloadResult
	var passed, all []time.Duration
	for _, h := range res.hits {
		d := h.done - h.sent
		all = append(all, d)
		switch h.status {
		case http.StatusOK:
			out.passed++
			passed = append(passed, d)
		case http.StatusTooManyRequests:
			out.blocked++
		default:
			out.other++
		}
	}
	if out.other > 0 {
		t.Errorf("system %q: %d calls neither passed nor blocked: %v", system, out.other, res.statuses())
	}
	out.p50Passed = percentile(passed, 0.50)
	out.p99Passed = percentile(passed, 0.99)
	out.p99All = percentile(all, 0.99)
	_, out.upstreamMaxInFlight = up.stats()
	g.stop()
	return out
}

// sysWaitInFlight waits until the upstream has had n calls in flight at once.
func sysWaitInFlight(t *testing.T, up *upstream, n int64) {
	t.Helper()
	poll(t, 10*time.Second, fmt.Sprintf("%d calls in flight at the upstream", n), func() string {
		if _, m := up.stats(); m < n {
			return fmt.Sprintf("only %d", m)
		}
		return ""
	})
}

// sysStatus GETs url and returns the status (0 on a transport error); unlike
// get it may run on any goroutine.
func sysStatus(url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
