package hotparam_test

import (
	"reflect"
	"slices"
	"testing"

	"sluice/config"
	"sluice/hotparam"
)

func inFlightRule() config.ParamRule {
	r := seedRule()
	r.Grade, r.Count = config.GradeConcurrency, 2
	return r
}

func TestConcurrencyPerValue(t *testing.T) {
	c := compile(t, inFlightRule()).For("get-order")
	enter := func(v string) (hotparam.Token, bool) {
		tok, vd := c.Enter(0, order(v), 1)
		return tok, !vd.Blocked
	}
	a1, ok1 := enter("1")
	a2, ok2 := enter("1")
	_, ok3 := enter("1")
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("value 1, count 2: passes %v %v %v, want true true false", ok1, ok2, ok3)
	}
	var held []hotparam.Token
	for i := range 4 {
		tok, ok := enter("102")
		if !ok {
			t.Fatalf("item 102 (count 4): call %d blocked", i)
		}
		held = append(held, tok)
	}
	if _, ok := enter("102"); ok {
		t.Fatal("item 102: fifth call in flight passed")
	}
	if _, ok := enter("7"); !ok {
		t.Fatal("value 7 was blocked by other values' calls")
	}

	a1.Exit(0, 200)
	a1.Exit(0, 200) // ending twice releases once
	a1.Cancel(0)
	b, ok := enter("1")
	if !ok {
		t.Fatal("a released slot was not reusable")
	}
	if _, ok := enter("1"); ok {
		t.Fatal("a double Exit released two slots")
	}
	a2.Cancel(0)
	b.Exit(0, 200)
	for i := range 2 {
		if _, ok := enter("1"); !ok {
			t.Fatalf("after all ended, call %d blocked", i)
		}
	}
	for i := range held {
		held[i].Exit(0, 200)
	}
	var zero hotparam.Token
	zero.Exit(0, 200) // the zero Token holds nothing
	zero.Cancel(0)
}

func TestConcurrencyDryRunCountsEveryCall(t *testing.T) {
	r := inFlightRule()
	r.DryRun, r.Count = true, 1
	c := compile(t, r).For("get-order")
	t1, v1 := c.Enter(0, order("1"), 1)
	t2, v2 := c.Enter(0, order("1"), 1)
	if v1.Blocked || v2.Blocked || v1.DryRun != 0 || v2.DryRun != 1 {
		t.Fatalf("dryRun: %+v %+v", v1, v2)
	}
	t1.Exit(0, 200)
	// One call is still in flight: a real limit of 1 would block.
	if _, v := c.Enter(0, order("1"), 1); v.DryRun != 1 {
		t.Fatalf("with one call still in flight dryRun=%d, want 1", v.DryRun)
	}
	t2.Exit(0, 200)
}

// A block by a later rule gives back what earlier rules took for the call.
func TestLaterRuleBlockGivesBackEarlierTokens(t *testing.T) {
	perUser := seedRule()
	perUser.Param, perUser.Items, perUser.Count = config.Key{userHdr}, nil, 1
	perOrder := inFlightRule()
	perOrder.Count = 1
	held := perUser
	held.Param, held.Grade, held.Count = config.Key{{Kind: config.SourceIP}}, config.GradeConcurrency, 1
	c := compile(t, held, perUser, perOrder).For("get-order")

	req := func(ip, user, id string) hotparam.Values {
		return vals{held.Param[0]: ip, userHdr: user, orderID: id}
	}
	tok, v := c.Enter(0, req("ip1", "alice", "1"), 1)
	if v.Blocked {
		t.Fatal("first call blocked")
	}
	if _, v = c.Enter(0, req("ip2", "bob", "1"), 1); !v.Blocked {
		t.Fatal("second call to order 1 passed a concurrency limit of 1")
	}
	// bob's token and ip2's slot were given back.
	if _, v = c.Enter(0, req("ip2", "bob", "2"), 1); v.Blocked {
		t.Fatal("a blocked call's tokens of earlier rules were not given back")
	}
	tok.Exit(0, 200)
}

// EnterQuotas writes its Token over whatever the destination held (the
// gateway reuses one in a pooled exchange): a pass into a Token an earlier
// call ended holds only its own slot, so a value limited to one call in
// flight never has two; a block leaves the zero Token.
func TestEnterQuotasOverwritesItsToken(t *testing.T) {
	r := seedRule()
	r.Grade, r.Count = config.GradeConcurrency, 1
	c := compile(t, r).For("get-order")
	var tok hotparam.Token
	for i := range 5 {
		if vd := c.EnterQuotas(&tok, 0, order("1"), 1, nil); vd.Blocked {
			t.Fatalf("call %d blocked with nothing in flight", i)
		}
		var other hotparam.Token
		if vd := c.EnterQuotas(&other, 0, order("1"), 1, nil); !vd.Blocked || !reflect.ValueOf(other).IsZero() {
			t.Fatalf("call %d: a second call in flight got %+v, token %+v; want blocked and the zero Token", i, vd, other)
		}
		tok.Exit(0, 200)
	}
	for i := range 2 {
		var a, b hotparam.Token
		va := c.EnterQuotas(&a, 0, order("1"), 1, nil)
		vb := c.EnterQuotas(&b, 0, order("1"), 1, nil)
		if va.Blocked || !vb.Blocked {
			t.Fatalf("round %d: two calls at once: %v, %v; want one in", i, va.Blocked, vb.Blocked)
		}
		a.Exit(0, 200)
	}
}

// An edited concurrency rule keeps counting the calls in flight that the
// rule it replaces let in, when the edit leaves what a value is unchanged
// (its items by value, match, param and cap); any other edit starts at 0.
// Each call ends exactly once, into the counter both rules share.
func TestChangedConcurrencyRuleCountsCallsInFlight(t *testing.T) {
	cases := []struct {
		name     string
		before   func(r *config.ParamRule)
		after    func(r *config.ParamRule)
		value    string
		running  int   // calls the old rule let in
		newCount int64 // the edited rule's limit for value
		adopted  bool
	}{
		{"count lowered with the old limit full", func(r *config.ParamRule) { r.Count = 3 }, func(r *config.ParamRule) { r.Count = 2 }, "1", 3, 2, true},
		{"count raised", func(r *config.ParamRule) {}, func(r *config.ParamRule) { r.Count = 4 }, "1", 2, 4, true},
		{"an item's count lowered", func(r *config.ParamRule) {}, func(r *config.ParamRule) { r.Items[0].Count = 1 }, "102", 4, 1, true},
		{"dryRun turned off", func(r *config.ParamRule) { r.DryRun = true }, func(r *config.ParamRule) {}, "1", 3, 2, true},
		{"an item's value changed", func(r *config.ParamRule) {}, func(r *config.ParamRule) { r.Items[1].Value = "104" }, "1", 2, 2, false},
		{"match changed", func(r *config.ParamRule) {}, func(r *config.ParamRule) {
			r.Match = config.ParamMatch{Strategy: config.MatchPrefix, Pattern: "1"}
		}, "1", 2, 2, false},
		{"maxTrackedValues changed", func(r *config.ParamRule) {}, func(r *config.ParamRule) { r.MaxTrackedValues = 50 }, "1", 2, 2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := inFlightRule()
			tc.before(&old)
			edited := old
			edited.Items = slices.Clone(old.Items)
			edited.DryRun = false
			tc.after(&edited)
			s1 := hotparam.Compile(defaulted(old), nil)
			var running []hotparam.Token
			for range tc.running {
				tok, vd := s1.For("get-order").Enter(0, order(tc.value), 1)
				if vd.Blocked {
					t.Fatalf("the old rule blocked call %d of %d", len(running)+1, tc.running)
				}
				running = append(running, tok)
			}
			s2 := hotparam.Compile(defaulted(edited), s1)
			c := s2.For("get-order")
			admit := func() (toks []hotparam.Token) {
				for {
					tok, vd := c.Enter(0, order(tc.value), 1)
					if vd.Blocked {
						return toks
					}
					toks = append(toks, tok)
					if len(toks) > 100 {
						t.Fatal("no limit")
					}
				}
			}
			want := tc.newCount
			if tc.adopted {
				want = max(tc.newCount-int64(tc.running), 0)
			}
			held := admit()
			if int64(len(held)) != want {
				t.Fatalf("with %d calls of the old rule running the edited rule let %d in, want %d", tc.running, len(held), want)
			}
			// The old calls end (on either snapshot's Token, as after a
			// reload): the edited rule fills up to its limit, no further.
			for _, tok := range running {
				tok.Exit(0, 200)
			}
			held = append(held, admit()...)
			if int64(len(held)) != tc.newCount {
				t.Fatalf("after the old calls ended %d in flight, want %d", len(held), tc.newCount)
			}
			for _, tok := range held {
				tok.Exit(0, 200)
			}
			if got := admit(); int64(len(got)) != tc.newCount {
				t.Fatalf("after every call ended the edited rule let %d in, want %d (a call ended twice or never)", len(got), tc.newCount)
			}
		})
	}
}

// Two edited copies of one concurrency rule: one takes the old rule's
// counters, the other starts at 0; sharing one table would count each call
// twice in it.
func TestChangedConcurrencyRuleAdoptedOnce(t *testing.T) {
	r := inFlightRule()
	s1 := hotparam.Compile(defaulted(r), nil)
	r.Count = 3
	s2 := hotparam.Compile(defaulted(r, r), s1)
	c := s2.For("get-order")
	for i := range 3 {
		if _, vd := c.Enter(0, order("1"), 1); vd.Blocked {
			t.Fatalf("call %d of 3 blocked: the two rules share one counter", i+1)
		}
	}
	if _, vd := c.Enter(0, order("1"), 1); !vd.Blocked {
		t.Fatal("a fourth call passed two rules of 3")
	}
}
