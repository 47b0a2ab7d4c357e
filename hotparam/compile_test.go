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
	b.Param, b.Items, b.Line = userHdr, nil, 20
	s1, err := hotparam.Compile([]config.ParamRule{a, b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := vals{orderID: "1", userHdr: "alice"}
	c1 := s1.For("get-order")
	for range 2 {
		c1.Enter(0, req, 1) // empties order 1 and alice
	}

	// Rule a moved (new Line), rule b changed its count.
	a2, b2 := a, b
	a2.Line, b2.Count = 30, 3
	s2, err := hotparam.Compile([]config.ParamRule{b2, a2}, s1)
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.Rules(); got[1].Line != 30 || got[0].Count != 3 {
		t.Errorf("Rules() = %+v, want the new rules", got)
	}
	c2 := s2.For("get-order")
	if _, v := c2.Enter(0, vals{orderID: "1"}, 1); !v.Blocked {
		t.Error("an unchanged rule lost its per-value state across Compile")
	}
	if _, v := c2.Enter(0, vals{userHdr: "alice"}, 1); v.Blocked {
		t.Error("a changed rule kept the old per-value state")
	}
	if n := s2.Tracked("get-order"); n != 2 { // order 1 kept, alice afresh
		t.Errorf("tracked %d, want 2", n)
	}

	// Both snapshots share the unchanged rule's state: a call entered on the
	// old one and ended after the reload is released where it was counted.
	conc := inFlightRule()
	conc.Count = 1
	s3, _ := hotparam.Compile([]config.ParamRule{conc}, nil)
	tok, _ := s3.For("get-order").Enter(0, order("1"), 1)
	s4, _ := hotparam.Compile([]config.ParamRule{conc}, s3)
	if _, v := s4.For("get-order").Enter(0, order("1"), 1); !v.Blocked {
		t.Error("a call in flight before a reload was forgotten")
	}
	tok.Exit(0)
	if _, v := s4.For("get-order").Enter(0, order("1"), 1); v.Blocked {
		t.Error("Exit of a call entered before the reload did not release it")
	}
}

// TestCompileRejectsInvalidRules: ranges are config's to check
// (config.Parse); Compile refuses only a grade or behaviour it does not know.
func TestCompileRejectsInvalidRules(t *testing.T) {
	good := seedRule()
	tests := []struct {
		name string
		edit func(r *config.ParamRule)
		want string
	}{
		{"grade", func(r *config.ParamRule) { r.Grade = "thread" }, `grade "thread" is not one of qps, concurrency`},
		{"behavior", func(r *config.ParamRule) { r.ControlBehavior = config.BehaviorWarmUp }, `controlBehavior "warmUp" is not one of reject, throttle`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := seedRule()
			bad.Line = 42
			tc.edit(&bad)
			s, err := hotparam.Compile([]config.ParamRule{good, bad}, nil)
			if err == nil || s != nil {
				t.Fatalf("Compile accepted it")
			}
			if want := "hotparam: paramRules[1] (line 42): " + tc.want; err.Error() != want {
				t.Errorf("error %q\nwant %q", err, want)
			}
		})
	}
}

func TestCompileDefaults(t *testing.T) {
	// Zero grade, behaviour, durationSec and cap mean qps, reject, 1s, 100000.
	s, err := hotparam.Compile([]config.ParamRule{{Resource: "r", Param: orderID, Count: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := s.For("r")
	if _, v := c.Enter(0, order("1"), 1); v.Blocked {
		t.Fatal("first call blocked")
	}
	if _, v := c.Enter(0, order("1"), 1); !v.Blocked || v.RetryAfter.Seconds() != 1 {
		t.Fatalf("second call: %+v, want blocked for 1s", v)
	}
}
