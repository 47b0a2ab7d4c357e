package hotparam_test

import (
	"testing"

	"sluice/config"
	"sluice/hotparam"
)

func TestCompileCarriesStateOfUnchangedRules(t *testing.T) {
	a := seedRule()
	a.Line = 10
	b := seedRule()
	b.Param, b.Items, b.Line = config.Key{userHdr}, nil, 20
	s1 := hotparam.Compile(defaulted(a, b), nil)
	req := vals{orderID: "1", userHdr: "alice"}
	c1 := s1.For("get-order")
	for range 2 {
		c1.Enter(0, req, 1) // empties order 1 and alice
	}

	// Rule a moved (new Line), rule b changed its count.
	a2, b2 := a, b
	a2.Line, b2.Count = 30, 3
	s2 := hotparam.Compile(defaulted(b2, a2), s1)
	if got := s2.Rules(); got[1].Line != 30 || got[0].Count != 3 {
		t.Errorf("Rules() = %+v, want the new rules", got)
	}
	c2 := s2.For("get-order")
	if _, v := c2.Enter(0, vals{orderID: "1"}, 1); !v.Blocked {
		t.Error("an unchanged rule lost its per-value state across Compile")
	}
	// The changed rule keeps the tokens alice spent (adoptState): 2 of its
	// new 3.
	for i, blocked := range []bool{false, true} {
		if _, v := c2.Enter(0, vals{userHdr: "alice"}, 1); v.Blocked != blocked {
			t.Errorf("a changed rule, count 2 -> 3, alice spent 2: call %d blocked %v, want %v", i, v.Blocked, blocked)
		}
	}
	if n := s2.Tracked("get-order"); n != 2 { // order 1 kept, alice carried
		t.Errorf("tracked %d, want 2", n)
	}

	// Both snapshots share the unchanged rule's state: a call entered on the
	// old one and ended after the reload is released where it was counted.
	conc := inFlightRule()
	conc.Count = 1
	s3 := hotparam.Compile(defaulted(conc), nil)
	tok, _ := s3.For("get-order").Enter(0, order("1"), 1)
	s4 := hotparam.Compile(defaulted(conc), s3)
	if _, v := s4.For("get-order").Enter(0, order("1"), 1); !v.Blocked {
		t.Error("a call in flight before a reload was forgotten")
	}
	tok.Exit(0, 200)
	if _, v := s4.For("get-order").Enter(0, order("1"), 1); v.Blocked {
		t.Error("Exit of a call entered before the reload did not release it")
	}
}

// TestDefaultedRule: a rule built in code and given config.Defaults (zero
// grade, behaviour, durationSec and cap) is qps, reject, 1s.
func TestDefaultedRule(t *testing.T) {
	c := compile(t, config.ParamRule{Resource: "r", Param: config.Key{orderID}, Count: 1}).For("r")
	if _, v := c.Enter(0, order("1"), 1); v.Blocked {
		t.Fatal("first call blocked")
	}
	if _, v := c.Enter(0, order("1"), 1); !v.Blocked || v.RetryAfter.Seconds() != 1 {
		t.Fatalf("second call: %+v, want blocked for 1s", v)
	}
}
