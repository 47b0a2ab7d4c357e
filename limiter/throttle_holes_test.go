package limiter_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/config"
	"sluice/internal/throttle/throttletest"
	"sluice/limiter"
)

// Clients less patient than the queue still get count a second forwarded:
// the slots they give back inside the queue are reused.
func TestThrottleImpatientClientsStillForwarded(t *testing.T) {
	c := compile(t, throttleRule(10, 5000)).Checker("r", "default")
	throttletest.ImpatientClientsStillForwarded(t, t0, func(now int64) (time.Duration, func(int64, bool), bool) {
		tok, v := c.Enter(now, "", 1)
		return v.Wait, func(at int64, forwarded bool) {
			if forwarded {
				tok.Exit(at, false)
			} else {
				tok.Cancel(at, limiter.ReasonNone)
			}
		}, !v.Blocked
	})
}

// A slot given up inside the queue is taken by the next call that fits it;
// a call does not take a hole standing for less spacing than it needs.
func TestThrottleHoleReuse(t *testing.T) {
	c := compile(t, throttleRule(10, 1000)).Checker("r", "default")
	a, _ := c.Enter(t0, "", 1) // goes now
	b, vb := c.Enter(t0, "", 1)
	d, vd := c.Enter(t0, "", 1)
	if vb.Wait != 100e6 || vd.Wait != 200e6 {
		t.Fatalf("queued waits %v %v, want 100ms 200ms", vb.Wait, vd.Wait)
	}
	b.Cancel(t0+ms, limiter.ReasonNone) // d is behind it: a hole at +100ms
	if _, v := c.Enter(t0+2*ms, "", 2); v.Blocked || v.Wait != 398e6 {
		t.Errorf("a 2-token call: blocked %v wait %v, want the tail (398ms): the hole holds one token", v.Blocked, v.Wait)
	}
	e, v := c.Enter(t0+3*ms, "", 1)
	if v.Blocked || v.Wait != 97e6 {
		t.Errorf("next call: blocked %v wait %v, want the given-up slot (97ms)", v.Blocked, v.Wait)
	}
	if _, v := c.Enter(t0+4*ms, "", 1); v.Blocked || v.Wait != 496e6 {
		t.Errorf("after the hole is taken: blocked %v wait %v, want the tail (496ms)", v.Blocked, v.Wait)
	}
	a.Exit(t0, false)
	d.Exit(t0, false)
	e.Exit(t0, false)
}

// Concurrent callers that give up half their slots never get two forwarded
// calls closer than the spacing, whether a call took the tail or a hole.
func TestThrottleHolesConcurrent(t *testing.T) {
	c := compile(t, throttleRule(1000, 50)).Checker("r", "default")
	var clock atomic.Int64
	clock.Store(t0)
	var mu sync.Mutex
	var forwarded []int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				now := clock.Add(100_000) // 10,000 calls a second offered
				tok, v := c.Enter(now, "", 1)
				if v.Blocked {
					continue
				}
				if (g+i)%2 == 0 {
					tok.Cancel(now+int64(v.Wait)/2, limiter.ReasonNone)
					continue
				}
				mu.Lock()
				forwarded = append(forwarded, now+int64(v.Wait))
				mu.Unlock()
				tok.Exit(now, false)
			}
		}()
	}
	wg.Wait()
	slices.Sort(forwarded)
	for i := 1; i < len(forwarded); i++ {
		if d := forwarded[i] - forwarded[i-1]; d < ms {
			t.Fatalf("two forwarded calls %d ns apart, spacing %d", d, ms)
		}
	}
	if len(forwarded) < 100 {
		t.Errorf("only %d forwarded", len(forwarded))
	}
}

// A warmUpThrottle slot given back after the warm-up rate changed moves the
// tail back by the spacing it was taken with, not by the new one. count 10,
// coldFactor 3, period 1 s: cold, calls are 300 ms apart; after an interval
// of 5 passes the rate is 10 (100 ms). The tail slot (+1200 ms) given back at
// +1002 ms leaves the tail at +900 ms, so a call at +1003 ms goes at once
// (taking the new spacing back would leave the tail at +1100 ms: 197 ms wait).
func TestWarmUpThrottleGiveBackUsesTakenSpacing(t *testing.T) {
	r := warmRule(10, 1, config.BehaviorWarmUpThrottle)
	r.ColdFactor, r.MaxQueueingTimeMs = 3, 1500
	c := compile(t, r).Checker("r", "default")
	T := 1000 * sec // interval-aligned
	var toks []limiter.Token
	for i := range 5 {
		tok, v := c.Enter(T, "", 1)
		if v.Blocked || v.Wait != time.Duration(i)*300*time.Millisecond {
			t.Fatalf("cold call %d: blocked %v wait %v, want %v", i, v.Blocked, v.Wait, time.Duration(i)*300*time.Millisecond)
		}
		toks = append(toks, tok)
	}
	// Next interval: the sync (here by a 20-token call the queue cannot take)
	// spends 5 tokens and the rate is 10.
	if _, v := c.Enter(T+1001*ms, "", 20); !v.Blocked {
		t.Fatal("a 20-token call fitted the queue")
	}
	toks[4].Cancel(T+1002*ms, limiter.ReasonNone)
	if _, v := c.Enter(T+1003*ms, "", 1); v.Blocked || v.Wait != 0 {
		t.Errorf("after the +1200 ms slot is given back: blocked %v wait %v, want to go at once (tail at +900 ms, spacing 100 ms)", v.Blocked, v.Wait)
	}
}
