package hotparam_test

import (
	"strconv"
	"testing"

	"sluice/config"
	"sluice/hotparam"
)

func TestTrackedNeverExceedsCap(t *testing.T) {
	for _, cap := range []int{1, 100, 5000} { // 5000 spreads over several shards
		t.Run(strconv.Itoa(cap), func(t *testing.T) {
			r := seedRule()
			r.MaxTrackedValues = cap
			s := compile(t, r)
			c := s.For("get-order")
			for i := range 3 * cap {
				tok, _ := c.Enter(int64(i), one(strconv.Itoa(i)), 1)
				tok.Exit(int64(i))
				if i%97 == 0 || i == 3*cap-1 {
					if n := s.Tracked("get-order"); n > cap {
						t.Fatalf("after %d distinct values %d are tracked, cap %d", i+1, n, cap)
					}
				}
			}
			if n := s.Tracked("get-order"); n != cap {
				t.Errorf("after 3x cap distinct values %d are tracked, want the cap %d", n, cap)
			}
		})
	}
}

// An evicted value returns with a full bucket, like a new value; a value kept
// recent is not evicted and keeps its state.
func TestEvictionForgetsOnlyLeastRecentlyUsed(t *testing.T) {
	r := seedRule()
	r.Items, r.MaxTrackedValues = nil, 10
	c := compile(t, r).For("get-order")
	drain := func(v string) {
		for range 2 {
			c.Enter(0, order(v), 1)
		}
	}
	drain("hot")
	drain("cold")
	for i := range 20 {
		c.Enter(0, order("hot"), 1) // blocked, but touches "hot"
		c.Enter(0, order(strconv.Itoa(i)), 1)
	}
	if _, v := c.Enter(0, order("hot"), 1); !v.Blocked {
		t.Error("a recently used value lost its state")
	}
	if _, v := c.Enter(0, order("cold"), 1); v.Blocked {
		t.Error("an evicted value did not come back with a full bucket")
	}
}

func TestActiveValuesAreNotEvicted(t *testing.T) {
	busy := inFlightRule()
	busy.Items, busy.Count, busy.MaxTrackedValues = nil, 1, 10
	queued := throttleRule(1000, 2000) // 1ms apart
	queued.MaxTrackedValues = 10

	tests := []struct {
		name string
		rule config.ParamRule
	}{
		{"concurrency: a value with a call in flight", busy},
		{"throttle: a value with a call queued", queued},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, tc.rule).For("get-order")
			// Make "v" active: one call in flight, or one waiting a second.
			tok, _ := c.Enter(0, order("v"), 1000)
			if tc.rule.Grade == config.GradeQPS {
				tok, _ = c.Enter(0, order("v"), 1000)
			}
			// Thirty other values, each idle 2ms after its call.
			now := sec(0.1)
			for i := range 30 {
				tk, v := c.Enter(now, order(strconv.Itoa(i)), 1)
				if v.Blocked {
					t.Fatalf("value %d blocked while idle values could be evicted", i)
				}
				tk.Exit(now)
				now += sec(0.002)
			}
			// Still tracked: "v" is at its limit (a fresh value would pass at once).
			if _, v := c.Enter(now, order("v"), 1); !v.Blocked && v.Wait == 0 {
				t.Error("an active value was evicted and came back fresh")
			}
			tok.Exit(0)
		})
	}
}

// When every tracked value is active, a new value cannot be tracked and the
// rule fails closed rather than grow past its cap.
func TestAllActiveFailsClosed(t *testing.T) {
	r := inFlightRule()
	r.MaxTrackedValues = 2
	s := compile(t, r)
	c := s.For("get-order")
	a, _ := c.Enter(0, order("a"), 1)
	b, _ := c.Enter(0, order("b"), 1)
	if _, v := c.Enter(0, order("c"), 1); !v.Blocked {
		t.Error("a third value passed while two values, the cap, are in flight")
	}
	if n := s.Tracked("get-order"); n != 2 {
		t.Errorf("tracked %d, want 2", n)
	}
	a.Exit(0)
	if _, v := c.Enter(0, order("c"), 1); v.Blocked {
		t.Error("a new value was blocked after a tracked value became idle")
	}
	b.Exit(0)
}

func TestTrackedWithoutRules(t *testing.T) {
	s, err := hotparam.Compile(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.For("x") != nil || s.Tracked("x") != 0 {
		t.Error("an empty Set has a checker")
	}
	// A nil Checker passes everything.
	tok, v := s.For("x").Enter(0, one("1"), 1)
	if v.Blocked {
		t.Error("nil Checker blocked")
	}
	tok.Exit(0)
}
