package cluster_test

// Giving back the tokens of a pass that a later check blocked
// (GiveBackFlow, GiveBackParam), against the real Redis on synthetic time.

import (
	"fmt"
	"testing"

	"sluice/cluster"
	"sluice/config"
)

// A pass given back counts no more from the next call on its window: a
// client refused by a later check does not spend the window.
func TestGiveBackFlowSteps(t *testing.T) {
	clock := new(synthClock)
	s := synthService(t, namespace(t), clock)
	rule := windowRule(3, 1000)
	type step struct {
		at     int64 // µs
		back   bool  // give the pass back at once
		wantOK bool
	}
	steps := []step{
		{at: 0, wantOK: true},
		{at: 10, back: true, wantOK: true},
		{at: 20, back: true, wantOK: true},
		{at: 30, wantOK: true},
		{at: 40, wantOK: true}, // 3 kept: 0, 30, 40
		{at: 50},
		{at: 1_000_001, back: true, wantOK: true}, // 0 left the window
		{at: 1_000_002, wantOK: true},             // the pass given back left room
		{at: 1_000_003},
	}
	for i, st := range steps {
		clock.us.Store(st.at)
		ok, _, _, _, stamp, err := s.AcquireFlowStamp(rule, "k", 1, false)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if ok != st.wantOK {
			t.Fatalf("step %d at %dµs: ok %v, want %v", i, st.at, ok, st.wantOK)
		}
		if ok && stamp <= 0 {
			t.Fatalf("step %d: a pass stamped %d", i, stamp)
		}
		if st.back {
			s.GiveBackFlow(rule, "k", 1, stamp)
		}
	}
}

// The exploit the give back closes: requests ?id=a&id=b whose b is spent
// are refused, and a's passes are given back, so a keeps its whole count.
func TestGiveBackParamValue(t *testing.T) {
	clock := new(synthClock)
	s := synthService(t, namespace(t), clock)
	rule := &config.ParamRule{Resource: "order", Grade: config.GradeQPS, Count: 2, DurationSec: 60, ClusterMode: true}
	for i := range 2 {
		clock.us.Store(int64(i))
		if ok, _, _, _, _, err := s.AcquireParamStamp(rule, 2, "b", 1, false); !ok || err != nil {
			t.Fatalf("b %d: %v %v", i, ok, err)
		}
	}
	for i := range 5 {
		clock.us.Store(int64(10 + 2*i))
		ok, _, _, _, stamp, err := s.AcquireParamStamp(rule, 2, "a", 1, false)
		if !ok || err != nil || stamp <= 0 {
			t.Fatalf("a with b, request %d: ok %v stamp %d err %v", i, ok, stamp, err)
		}
		clock.us.Store(int64(11 + 2*i))
		if ok, _, _ := s.AcquireParam(rule, 2, "b", 1); ok {
			t.Fatalf("b passed a third time")
		}
		s.GiveBackParam(rule, 2, "a", 1, stamp) // the request was refused
	}
	for i := range 3 {
		clock.us.Store(int64(100 + i))
		ok, _, err := s.AcquireParam(rule, 2, "a", 1)
		if err != nil || ok != (i < 2) {
			t.Fatalf("a alone, call %d: %v %v; want a's whole count of 2 to pass", i, ok, err)
		}
	}
}

// Under a steady overload where every other pass is given back, no real
// interval holds more than count of the passes kept, and a call is refused
// only when the passes kept in the interval before it leave no room for
// it: exactly while a slot is one token; above 1024 slots, where returned
// tokens wait for a whole group (and the tail group, which may be partial,
// is never removed), with up to two groups less room.
func TestGiveBackKeepsTheBound(t *testing.T) {
	t.Parallel()
	clock := new(synthClock)
	s := synthService(t, namespace(t), clock)
	const intervals = 4
	for i, c := range windowCases() {
		t.Run(c.String(), func(t *testing.T) {
			rule := windowRule(c.count, c.intervalMs)
			key := fmt.Sprint("back", c)
			iv := c.intervalMs * 1000
			fits := int64(c.count) / c.n
			slack := 2 * (groupSlack(c.count) + 1)
			if c.count <= cluster.RingSlots {
				slack = 0
			}
			start := int64(i)*3600e6 + int64(i)*37_000%iv
			var kept []pass
			given, refused := 0, 0
			for _, at := range grid(start, iv, 3*fits, intervals) {
				clock.us.Store(at)
				ok, _, _, _, stamp, err := s.AcquireFlowStamp(rule, key, c.n, false)
				if err != nil {
					t.Fatalf("at %dµs: %v", at, err)
				}
				if !ok {
					refused++
					if in := keptSince(kept, at-iv); in+c.n <= int64(c.count)-slack {
						t.Fatalf("refused at %dµs with %d tokens kept in the interval before, count %g", at, in, c.count)
					}
					continue
				}
				if given++; given%2 == 0 {
					s.GiveBackFlow(rule, key, c.n, stamp)
					continue
				}
				kept = append(kept, pass{at, c.n})
			}
			if m := maxInAnyWindow(kept, iv); m > int64(c.count) {
				t.Errorf("%d tokens kept in one real interval, count %g", m, c.count)
			}
			if refused == 0 {
				t.Errorf("no call refused under a 3x overload")
			}
		})
	}
}

// keptSince is the tokens of ps passed after from.
func keptSince(ps []pass, from int64) int64 {
	var n int64
	for _, p := range ps {
		if p.at > from {
			n += p.n
		}
	}
	return n
}

// A calendar quota's pass has no stamp: it is not given back.
func TestGiveBackLeavesQuotasAlone(t *testing.T) {
	s := newService(t, cluster.Options{URL: redisURL(t), Namespace: namespace(t)})
	rule := &config.ParamRule{Resource: "order", Grade: config.GradeQPS, Count: 1, Window: config.WindowDay, ClusterMode: true}
	ok, _, _, _, err := s.AcquireQuota(rule, 1, "a", 1)
	if !ok || err != nil {
		t.Fatalf("first call: %v %v", ok, err)
	}
	s.GiveBackParam(rule, 1, "a", 1, 1) // any stamp: a quota ignores it
	if ok, _, _, _, err := s.AcquireQuota(rule, 1, "a", 1); ok || err != nil {
		t.Fatalf("second call: %v %v, want refused", ok, err)
	}
}
