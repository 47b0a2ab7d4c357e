package cluster

import (
	"testing"
	"time"
)

func TestBlockCacheSteps(t *testing.T) {
	a, b := &ruleSpec{prefix: "a"}, &ruleSpec{prefix: "b"}
	var c blockCache
	const ms = time.Millisecond
	c.add(a, "x", 2, 0, 25*ms, 25*ms, 0) // a/x refused 2 tokens until 25ms
	steps := []struct {
		spec   *ruleSpec
		origin string
		n      int64
		now    time.Duration
		want   bool
	}{
		{a, "x", 2, 10 * ms, true},
		{a, "x", 3, 10 * ms, true},   // more than was refused: refused too
		{a, "x", 1, 10 * ms, false},  // less might fit: ask Redis
		{a, "y", 2, 10 * ms, false},  // another origin
		{b, "x", 2, 10 * ms, false},  // another rule
		{a, "x", 2, 25*ms - 1, true}, // until the window can take them
		{a, "x", 2, 25 * ms, false},  // then ask Redis again
		{a, "x", 2, 10 * ms, false},  // the ended entry was dropped
	}
	for i, s := range steps {
		if got, _ := c.blocked(s.spec, s.origin, s.n, s.now); got != s.want {
			t.Errorf("step %d: blocked(%s, %q, n=%d, %v) = %v, want %v", i, s.spec.prefix, s.origin, s.n, s.now, got, s.want)
		}
	}
}

// A refusal Redis decided before a lift, whose answer arrives after this
// gateway forgot or cleared its notes, is not remembered: the window may
// be empty by now. One decided after the lift is.
func TestBlockCacheDropsRefusalsDecidedBeforeALift(t *testing.T) {
	s := &ruleSpec{}
	for _, lift := range []struct {
		name string
		do   func(c *blockCache)
	}{
		{"forget", func(c *blockCache) { c.forget(s, "locked", true) }},
		{"clear", func(c *blockCache) { c.clear() }},
	} {
		var c blockCache
		before := c.generation() // the call starts; Redis refuses it
		lift.do(&c)              // the lift is noted before its answer arrives
		c.add(s, "locked", 1, 0, time.Hour, time.Hour, before)
		if blocked, _ := c.blocked(s, "locked", 1, time.Second); blocked {
			t.Errorf("%s: a refusal decided before the lift is remembered after it", lift.name)
		}
		c.add(s, "locked", 1, 0, time.Hour, time.Hour, c.generation())
		if blocked, until := c.blocked(s, "locked", 1, time.Second); !blocked || until != time.Hour {
			t.Errorf("%s: a refusal decided after the lift is not remembered", lift.name)
		}
	}
}

func TestBlockCacheIsBounded(t *testing.T) {
	var c blockCache
	s := &ruleSpec{}
	for i := range maxBlocked + 10 {
		c.add(s, itoa(int64(i)), 1, 0, time.Second, time.Second, 0)
	}
	if len(c.m) != maxBlocked {
		t.Fatalf("%d entries, want the cap %d", len(c.m), maxBlocked)
	}
	// Once they have ended, a new entry sweeps them out.
	c.add(s, "late", 1, 2*time.Second, 3*time.Second, 3*time.Second, 0)
	if blocked, _ := c.blocked(s, "late", 1, 2*time.Second); len(c.m) != 1 || !blocked {
		t.Fatalf("after the sweep: %d entries, want only the new one", len(c.m))
	}
}

func TestBlockCacheAllocatesNothingOnLookup(t *testing.T) {
	var c blockCache
	s := &ruleSpec{}
	c.add(s, "origin", 1, 0, time.Hour, time.Hour, 0)
	origin := "origin"
	if a := testing.AllocsPerRun(100, func() { c.blocked(s, origin, 1, time.Second) }); a != 0 {
		t.Errorf("blocked allocates %v times per call", a)
	}
}
