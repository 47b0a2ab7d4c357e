package hotparam_test

import (
	"testing"

	"sluice/config"
	"sluice/hotparam"
	"sluice/limiter"
)

// TestSeveralValues: a call with several values of a rule's source passes
// only if each passes, and a value that blocks gives back what the
// values before it took, for each kind of rule, so a decoy value neither
// hides the one it travels with nor pays for it.
func TestSeveralValues(t *testing.T) {
	bucket := seedRule()
	bucket.Items, bucket.Count = nil, 2
	inFlight := inFlightRule()
	inFlight.Items = nil
	queue := throttleRule(1, 0) // one a second, no queueing
	for _, tc := range []struct {
		name string
		rule config.ParamRule
		// spent is how many calls of a value fill it: a third call of
		// that value alone is then blocked.
		spent int
	}{
		{"qps", bucket, 2},
		{"concurrency", inFlight, 2},
		{"throttle", queue, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, tc.rule).For("get-order")
			enter := func(now int64, ids ...string) (hotparam.Token, limiter.Verdict) {
				return c.Enter(now, many{orderID: ids}, 1)
			}
			for i := range tc.spent {
				if _, v := enter(0, "102"); v.Blocked {
					t.Fatalf("102 alone, call %d: blocked", i+1)
				}
			}
			for _, ids := range [][]string{{"101", "102"}, {"102", "101"}, {"7", "8", "102"}} {
				if tok, v := enter(0, ids...); !v.Blocked || v.Reason != limiter.ReasonParam {
					tok.Exit(0, 200)
					t.Fatalf("%q with 102 spent: %+v, want blocked by param", ids, v)
				}
			}
			// 101, 7 and 8 were each given back what the blocked calls took.
			for _, id := range []string{"101", "7", "8"} {
				for i := range tc.spent {
					if _, v := enter(0, id); v.Blocked || v.Wait != 0 {
						t.Fatalf("%s alone, call %d after the blocked pairs: %+v, want a pass at once", id, i+1, v)
					}
				}
			}
			// Two fresh values pass together, and each is counted.
			if _, v := enter(0, "201", "202"); v.Blocked {
				t.Fatalf("two fresh values: %+v", v)
			}
			for i := 1; i < tc.spent; i++ {
				if _, v := enter(0, "202"); v.Blocked {
					t.Fatalf("202, call %d: blocked", i+1)
				}
			}
			if _, v := enter(0, "202"); !v.Blocked {
				t.Fatal("202 after a pass with 201 and its own calls: passed, want its call with 201 counted")
			}
		})
	}
}

// TestSeveralValuesConcurrencyExit: a passed call with two values holds a
// slot of each until it ends, and Exit releases both.
func TestSeveralValuesConcurrencyExit(t *testing.T) {
	r := inFlightRule()
	r.Items, r.Count = nil, 1
	c := compile(t, r).For("get-order")
	tok, v := c.Enter(0, many{orderID: {"101", "102"}}, 1)
	if v.Blocked {
		t.Fatalf("two values: %+v", v)
	}
	for _, id := range []string{"101", "102"} {
		if _, v := c.Enter(0, order(id), 1); !v.Blocked {
			t.Fatalf("%s while the pair is in flight: passed", id)
		}
	}
	tok.Exit(0, 200)
	for _, id := range []string{"101", "102"} {
		if _, v := c.Enter(0, order(id), 1); v.Blocked {
			t.Fatalf("%s after the pair ended: blocked", id)
		}
	}
}

// TestValuesNotCheckable: a source the caller cannot read (too many
// values) stops the check; what earlier rules took is given back and the
// call is blocked with no reason, for the caller to answer.
func TestValuesNotCheckable(t *testing.T) {
	first := seedRule()
	first.Items, first.Count, first.Param = nil, 1, config.Key{userHdr}
	second := seedRule()
	c := compile(t, first, second).For("get-order")
	tok, v := c.Enter(0, many{userHdr: {"u1"}, orderID: nil}, 1)
	if !v.Blocked || v.Reason != limiter.ReasonNone {
		tok.Exit(0, 200)
		t.Fatalf("an uncheckable source: %+v, want blocked with ReasonNone", v)
	}
	if _, v := c.Enter(0, many{userHdr: {"u1"}}, 1); v.Blocked {
		t.Fatal("u1 (count 1) blocked: the uncheckable call kept its token")
	}
}

// TestEnterSeveralTrackedValues: one value per rule allocates nothing
// (TestEnterTrackedValueDoesNotAllocate); nor do three values of one rule.
func TestEnterSeveralTrackedValues(t *testing.T) {
	r := seedRule()
	r.Items, r.Count = nil, 1e9
	c := compile(t, r).For("get-order")
	v := many{orderID: {"101", "102", "103"}}
	var vals hotparam.Values = v
	tok, _ := c.Enter(0, vals, 1)
	tok.Exit(0, 200)
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 1000
		tok, vd := c.Enter(now, vals, 1)
		if vd.Blocked {
			t.Fatal("blocked")
		}
		tok.Exit(now, 200)
	})
	if allocs > 0 {
		t.Errorf("three tracked values: %v allocs, want 0", allocs)
	}
}

// TestValuesNotCheckableDryRun: a dryRun rule whose source cannot be read
// counts a would-be block and changes nothing; the rules after it still
// decide.
func TestValuesNotCheckableDryRun(t *testing.T) {
	dry := seedRule()
	dry.DryRun = true
	after := seedRule()
	after.Items, after.Count, after.Param = nil, 1, config.Key{userHdr}
	c := compile(t, dry, after).For("get-order")
	v := many{orderID: nil, userHdr: {"u1"}}
	if _, vd := c.Enter(0, v, 1); vd.Blocked || vd.DryRun != 1 {
		t.Fatalf("dryRun rule on an uncheckable source: %+v, want a pass with DryRun 1", vd)
	}
	if _, vd := c.Enter(0, v, 1); !vd.Blocked || vd.Reason != limiter.ReasonParam {
		t.Fatalf("the next rule's block: %+v, want blocked by param", vd)
	}
}
