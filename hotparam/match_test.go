package hotparam_test

import (
	"strconv"
	"testing"

	"sluice/config"
	"sluice/hotparam"
)

// passes sends calls calls of one value at one instant to c and returns how
// many passed (each passed call ends at once).
func passes(t testing.TB, c *hotparam.Checker, at int64, value string, calls int) int {
	t.Helper()
	n := 0
	for range calls {
		tok, v := c.Enter(at, order(value), 1)
		if !v.Blocked {
			n++
			tok.Exit(at, 200)
		}
	}
	return n
}

// TestRuleMatchLimitsOnlyMatchingValues: a rule with match limits each value
// that matches (each in its own bucket) and leaves every other value
// untouched and untracked, for each strategy.
func TestRuleMatchLimitsOnlyMatchingValues(t *testing.T) {
	for _, tc := range []struct {
		strategy config.MatchStrategy
		pattern  string
		limited  []string
		free     []string
	}{
		{config.MatchExact, "102", []string{"102"}, []string{"1020", "10"}},
		{config.MatchPrefix, "vip-", []string{"vip-1", "vip-2"}, []string{"std-1", "xvip-1"}},
		{config.MatchContains, "bot", []string{"a-bot", "bot"}, []string{"human", "BOT"}},
		{config.MatchRegex, `^user-[0-9]+$`, []string{"user-1", "user-42"}, []string{"user-x", "xuser-1", "user-1x"}},
		{config.MatchRegex, `[0-9]{3}`, []string{"a123", "9999"}, []string{"12", "ab"}},
		{config.MatchCIDR, "10.0.0.0/8", []string{"10.1.2.3", "10.9.9.9"}, []string{"11.0.0.1", "2001:db8::1", "not-an-ip"}},
		{config.MatchCIDR, "2001:db8::/32", []string{"2001:db8::1", "2001:db8::2"}, []string{"10.0.0.1", "2001:db9::1"}},
	} {
		t.Run(string(tc.strategy)+" "+tc.pattern, func(t *testing.T) {
			r := seedRule()
			r.Items, r.Count = nil, 2
			r.Match = config.ParamMatch{Strategy: tc.strategy, Pattern: tc.pattern}
			s := compile(t, r)
			c := s.For("get-order")
			for _, v := range tc.limited {
				if n := passes(t, c, 0, v, 10); n != 2 {
					t.Errorf("%q matches: %d of 10 passed, want 2 (its own bucket)", v, n)
				}
			}
			for _, v := range tc.free {
				if n := passes(t, c, 0, v, 10); n != 10 {
					t.Errorf("%q does not match: %d of 10 passed, want all", v, n)
				}
			}
			if got := s.Tracked("get-order"); got != len(tc.limited) {
				t.Errorf("tracked %d values, want %d (only those that match)", got, len(tc.limited))
			}
		})
	}
}

// TestItemClasses: an item with a match gives its count to every value it
// matches, each value in its own bucket; the first matching item in file
// order wins, exact items included; values no item matches get the rule's
// count.
func TestItemClasses(t *testing.T) {
	r := seedRule()
	r.Count = 1
	r.Items = []config.ParamItem{
		{Value: "10.1.0.0/16", Match: config.MatchCIDR, Count: 3},
		{Value: `^user-[0-9]+$`, Match: config.MatchRegex, Count: 4},
		{Value: "99", Count: 5},                           // exact, before the prefix 9
		{Value: "9", Match: config.MatchPrefix, Count: 2}, // 9, 91, 999 (not 99)
		{Value: "999", Count: 8},                          // exact, after the prefix 9: never reached
		{Value: "-admin", Match: config.MatchContains, Count: 0},
	}
	c := compile(t, r).For("get-order")
	for _, tc := range []struct {
		value string
		pass  int
	}{
		{"10.1.2.3", 3}, {"10.1.2.4", 3}, {"10.2.0.1", 1},
		{"user-1", 4}, {"user-2", 4}, {"user-x", 1},
		{"99", 5}, {"9", 2}, {"91", 2}, {"999", 2},
		{"x-admin-y", 0}, {"7", 1},
	} {
		if n := passes(t, c, 0, tc.value, 10); n != tc.pass {
			t.Errorf("%q: %d of 10 passed, want %d", tc.value, n, tc.pass)
		}
	}
	// Each value refills on its own bucket.
	if n := passes(t, c, sec(1), "10.1.2.3", 10); n != 3 {
		t.Errorf("10.1.2.3 a second later: %d passed, want 3", n)
	}
}

// TestMatchWithItemsAndRuleMatch: items apply to the values the rule's
// match selects; other values pass untouched even when an item would
// match them.
func TestMatchWithItemsAndRuleMatch(t *testing.T) {
	r := seedRule()
	r.Count = 1
	r.Match = config.ParamMatch{Strategy: config.MatchPrefix, Pattern: "a"}
	r.Items = []config.ParamItem{{Value: "b", Match: config.MatchContains, Count: 3}}
	c := compile(t, r).For("get-order")
	for v, want := range map[string]int{"ab": 3, "ax": 1, "bb": 10} {
		if n := passes(t, c, 0, v, 10); n != want {
			t.Errorf("%q: %d of 10 passed, want %d", v, n, want)
		}
	}
}

// matchRules are rules whose check matches values (limits high enough that
// nothing blocks): the cases of TestMatchDoesNotAllocate and
// BenchmarkEnterMatch, with a value each case limits.
func matchRules() []struct {
	name  string
	rule  config.ParamRule
	value string
} {
	rule := func(m config.ParamMatch, items ...config.ParamItem) config.ParamRule {
		r := seedRule()
		r.Count, r.Match, r.Items = 1e9, m, items
		return r
	}
	exact := make([]config.ParamItem, 10)
	for i := range exact {
		exact[i] = config.ParamItem{Value: "order-" + strconv.Itoa(i), Count: 1e9}
	}
	return []struct {
		name  string
		rule  config.ParamRule
		value string
	}{
		{"none", rule(config.ParamMatch{}), "order-5"},
		{"exactItems", rule(config.ParamMatch{}, exact...), "order-5"},
		{"prefix", rule(config.ParamMatch{Strategy: config.MatchPrefix, Pattern: "order-"}), "order-5"},
		{"regex", rule(config.ParamMatch{Strategy: config.MatchRegex, Pattern: `^order-[0-9]+$`}), "order-5"},
		{"cidr", rule(config.ParamMatch{Strategy: config.MatchCIDR, Pattern: "10.0.0.0/8"}), "10.1.2.3"},
		{"cidr6", rule(config.ParamMatch{Strategy: config.MatchCIDR, Pattern: "2001:db8::/32"}), "2001:db8::7"},
		{"regexItem", rule(config.ParamMatch{}, config.ParamItem{Value: `^order-[0-9]+$`, Match: config.MatchRegex, Count: 1e9}), "order-5"},
		{"composite", rule(config.ParamMatch{Strategy: config.MatchPrefix, Pattern: "10.1.2.3+"}), "10.1.2.3+acme"},
	}
}

// TestMatchDoesNotAllocate: a rule's match and its items' classes add no
// allocation to the check of a tracked value.
func TestMatchDoesNotAllocate(t *testing.T) {
	for _, tc := range matchRules() {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, tc.rule).For("get-order")
			v := one(tc.value)
			now := int64(0)
			allocs := testing.AllocsPerRun(1000, func() {
				now += 1000
				tok, vd := c.Enter(now, v, 1)
				if vd.Blocked {
					t.Fatal("blocked")
				}
				tok.Exit(now, 200)
			})
			if allocs > 0 {
				t.Errorf("Enter+Exit: %v allocs, want 0", allocs)
			}
		})
	}
}

// BenchmarkEnterMatch is the check (Enter+Exit, one goroutine) of a tracked value through
// a rule that matches it: by exact items, a prefix, a regex or a cidr, an
// item class, or a composite key's joined value. "none" is the same rule
// without match, for comparison.
func BenchmarkEnterMatch(b *testing.B) {
	for _, tc := range matchRules() {
		b.Run(tc.name, func(b *testing.B) {
			c := compile(b, tc.rule).For("get-order")
			v := one(tc.value)
			b.ReportAllocs()
			now := int64(0)
			for b.Loop() {
				now += 100
				tok, vd := c.Enter(now, v, 1)
				if vd.Blocked {
					b.Fatal("blocked")
				}
				tok.Exit(now, 200)
			}
		})
	}
}
