package hotparam_test

import (
	"reflect"
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
