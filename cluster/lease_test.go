package cluster

import (
	"testing"
	"time"
)

func TestLeaseCacheSteps(t *testing.T) {
	a, b := &ruleSpec{prefix: "a"}, &ruleSpec{prefix: "b"}
	var c leaseCache
	const ms = time.Millisecond
	giveUp := func(now time.Duration) time.Duration { return now + 20*ms }
	type step struct {
		do         string // "take" or "grant"
		spec       *ruleSpec
		n          int64 // take: tokens; grant: tokens leased
		now, until time.Duration
		wantOK     bool
		wantDemand int64
	}
	steps := []step{
		{do: "take", spec: a, n: 1, now: 0},                         // demand unknown: no lease asked
		{do: "take", spec: a, n: 1, now: 1 * ms},                    // sample shorter than minSample: still unknown
		{do: "take", spec: a, n: 1, now: 10 * ms, wantDemand: 300},  // 3 tokens in 10ms: 300/s, ask a lease
		{do: "take", spec: a, n: 1, now: 11 * ms},                   // a request is in flight: do not ask twice
		{do: "grant", spec: a, n: 3, now: 10 * ms, until: 25 * ms},  // 3 tokens until 25ms
		{do: "take", spec: a, n: 1, now: 12 * ms, wantOK: true},     // local
		{do: "take", spec: a, n: 2, now: 13 * ms, wantOK: true},     // local, n=2
		{do: "take", spec: b, n: 1, now: 13 * ms},                   // another rule has its own
		{do: "take", spec: a, n: 1, now: 14 * ms, wantDemand: 300},  // used up; 4ms is too short a sample: the last rate stands
		{do: "grant", spec: a, n: 2, now: 14 * ms, until: 25 * ms},  // 2 more
		{do: "take", spec: a, n: 3, now: 15 * ms, wantDemand: 1600}, // not enough for n=3; 8 tokens asked in 5ms
		{do: "grant", spec: a, n: 0, now: 15 * ms, until: 0},        // refused: nothing leased, the 2 tokens stay
		{do: "take", spec: a, n: 2, now: 24 * ms, wantOK: true},     // still before 25ms
		{do: "grant", spec: a, n: 4, now: 24 * ms, until: 50 * ms},  // (a late answer) a later lease
		{do: "take", spec: a, n: 1, now: 49 * ms, wantOK: true},     // usable until 50ms
		{do: "take", spec: a, n: 1, now: 50 * ms, wantDemand: 114},  // its time is up: the rest is void (4 tokens in 35ms)
	}
	for i, s := range steps {
		switch s.do {
		case "take":
			ok, d, _, _, _ := c.take(s.spec, "o", s.n, s.now, giveUp(s.now))
			if ok != s.wantOK || d != s.wantDemand {
				t.Errorf("step %d: take(%s, n=%d, %v) = %v, demand %d; want %v, %d", i, s.spec.prefix, s.n, s.now, ok, d, s.wantOK, s.wantDemand)
			}
		case "grant":
			c.grant(s.spec, "o", s.n, 1, s.now, s.until, -1, 0)
		}
	}
}

func TestLeaseRequestGivesUp(t *testing.T) {
	var c leaseCache
	s := &ruleSpec{}
	const ms = time.Millisecond
	c.take(s, "", 1, 0, 20*ms)
	if _, d, _, _, _ := c.take(s, "", 1, 10*ms, 30*ms); d == 0 {
		t.Fatal("want a lease request after a 10ms sample")
	}
	// Its caller timed out and never reported back: after giveUp another may ask.
	if _, d, _, _, _ := c.take(s, "", 1, 29*ms, 49*ms); d != 0 {
		t.Errorf("asked again at 29ms while the first request (until 30ms) may be in flight")
	}
	if _, d, _, _, _ := c.take(s, "", 1, 31*ms, 51*ms); d == 0 {
		t.Errorf("no request after the first one gave up at 30ms")
	}
}

func TestLeaseCacheIsBounded(t *testing.T) {
	var c leaseCache
	s := &ruleSpec{}
	for i := range maxLeased + 10 {
		c.take(s, itoa(int64(i)), 1, 0, 0)
	}
	if len(c.m) != maxLeased {
		t.Fatalf("%d entries, want the cap %d", len(c.m), maxLeased)
	}
	// Entries idle for over a second are swept to make room, by one sweep
	// a second at most.
	c.take(s, "early", 1, 500*time.Millisecond, 0)
	c.take(s, "early2", 1, time.Second, 0)
	if _, ok := c.m[blockKey{s, "early2"}]; ok || len(c.m) != maxLeased {
		t.Fatalf("a second sweep within a second: %d entries", len(c.m))
	}
	c.take(s, "late", 1, 2*time.Second, 0)
	if len(c.m) != 1 {
		t.Fatalf("after the sweep: %d entries, want only the new one", len(c.m))
	}
}

func TestLeaseTakeAllocatesNothing(t *testing.T) {
	var c leaseCache
	s := &ruleSpec{}
	origin := "origin"
	c.take(s, origin, 1, 0, 0)
	c.grant(s, origin, 1<<40, 1, 0, time.Hour, -1, 0)
	now := time.Duration(0)
	if a := testing.AllocsPerRun(100, func() { now++; c.take(s, origin, 1, now, now) }); a != 0 {
		t.Errorf("take allocates %v times per call", a)
	}
}
