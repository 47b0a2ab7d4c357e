package proxy

import (
	"testing"

	"sluice/config"
)

// TestAPIGroupReach: what the snapshot decides per route, before any
// request: a static pattern is matched or not; a pattern with parameters
// is decided by its literal start where that suffices, and left open (the
// request's path is tested) where it does not. An open decision that is
// wrong costs time; an "all" or "none" that is wrong would count requests
// on the wrong groups, so each is checked against paths the route serves.
func TestAPIGroupReach(t *testing.T) {
	tests := []struct {
		pattern string
		match   config.APIMatch
		want    reach
		paths   []string // paths the route serves, to check the decision on
	}{
		{"/cart", config.APIMatch{Exact: "/cart"}, reachAll, []string{"/cart"}},
		{"/cart", config.APIMatch{Exact: "/cart/"}, reachNone, []string{"/cart"}},
		{"/cart", config.APIMatch{Prefix: "/ca"}, reachAll, []string{"/cart"}},
		{"/cart", config.APIMatch{Regex: "^/c.rt$"}, reachAll, []string{"/cart"}},
		{"/cart", config.APIMatch{Regex: "x"}, reachNone, []string{"/cart"}},
		{"/order/{id}", config.APIMatch{Prefix: "/order/"}, reachAll, []string{"/order/1"}},
		{"/order/{id}", config.APIMatch{Prefix: "/ord"}, reachAll, []string{"/order/1"}},
		{"/order/{id}", config.APIMatch{Prefix: "/order/1"}, reachSome, []string{"/order/1", "/order/2"}},
		{"/order/{id}", config.APIMatch{Prefix: "/cart"}, reachNone, []string{"/order/1"}},
		{"/order/{id}", config.APIMatch{Exact: "/order/7"}, reachSome, []string{"/order/7", "/order/8"}},
		{"/order/{id}", config.APIMatch{Exact: "/orders"}, reachNone, []string{"/order/1"}},
		{"/v2/orders/{id}", config.APIMatch{Regex: "^/v[0-9]+/orders"}, reachSome, []string{"/v2/orders/1"}},
		{"/v2/orders/{id}", config.APIMatch{Regex: "^/v1/"}, reachNone, []string{"/v2/orders/1"}}, // a prefix test
		{"/v2/orders/{id}", config.APIMatch{Regex: "^/v2/"}, reachAll, []string{"/v2/orders/1"}},
		{"/v2/orders/{id}", config.APIMatch{Regex: "^/x[0-9]"}, reachNone, []string{"/v2/orders/1"}},
		{"/v2/orders/{id}", config.APIMatch{Regex: "orders/[0-9]+$"}, reachSome, []string{"/v2/orders/1", "/v2/orders/x"}},
		{"/v2/orders/{id}", config.APIMatch{Regex: "(?i)^/V2/"}, reachSome, []string{"/v2/orders/1"}},
		{"/*", config.APIMatch{Prefix: "/"}, reachAll, []string{"/", "/a/b"}},
		{"/*", config.APIMatch{Prefix: "/a/"}, reachSome, []string{"/a/b", "/b"}},
		{"/files/*", config.APIMatch{Exact: "/cart"}, reachNone, []string{"/files/x"}},
	}
	for _, tt := range tests {
		pt, err := compilePathTest(tt.match, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := pt.reach(tt.pattern); got != tt.want {
			t.Errorf("%s on route %s: reach %d, want %d", describeMatch(tt.match), tt.pattern, got, tt.want)
		}
		for _, p := range tt.paths {
			if m := pt.match(p); tt.want == reachAll && !m || tt.want == reachNone && m {
				t.Errorf("%s on %s (route %s): match %v contradicts reach %d", describeMatch(tt.match), p, tt.pattern, m, tt.want)
			}
		}
	}
}

func describeMatch(m config.APIMatch) string {
	switch {
	case m.Exact != "":
		return "exact " + m.Exact
	case m.Prefix != "":
		return "prefix " + m.Prefix
	}
	return "regex " + m.Regex
}

// TestAPIGroupIndexAgrees: the first-segment index of a route's groups finds
// exactly the groups that testing each one finds, for paths in and out of
// every kind of test, keyed or not.
func TestAPIGroupIndexAgrees(t *testing.T) {
	matches := [][]config.APIMatch{
		{{Prefix: "/g1/"}, {Exact: "/e1"}},
		{{Prefix: "/g"}},          // no whole segment: tested for every path
		{{Regex: "^/r2/[0-9]+$"}}, // keyed by /r2/
		{{Regex: "^/r"}, {Exact: "/x/y"}},
		{{Regex: "orders"}}, // not anchored: tested for every path
		{{Exact: "/"}, {Prefix: "/g1/a"}},
		{{Regex: "(?m)^/m/"}}, // a line anchor decides nothing
		{{Prefix: "/e1"}},
	}
	var entries []*groupEntry
	for _, ms := range matches {
		e := &groupEntry{}
		for _, m := range ms {
			pt, err := compilePathTest(m, true)
			if err != nil {
				t.Fatal(err)
			}
			e.tests = append(e.tests, pt)
		}
		entries = append(entries, e)
	}
	entries = append(entries, &groupEntry{}) // matches every path of the route
	gg := newGroupsGuard(entries)
	for _, p := range []string{"/", "/g1/", "/g1/a", "/g1", "/g2/x", "/e1", "/e1/", "/e10", "/r2/12", "/r2/x", "/r3/1",
		"/x/y", "/x/yz", "/a/orders", "/m/", "/gx"} {
		var m matchSet
		if !gg.match(p, &m) {
			t.Fatal("not indexed")
		}
		for i, e := range entries {
			if got, want := m.has(i), e.matches(p); got != want {
				t.Errorf("%s, entry %d (%v): indexed %v, tested %v", p, i, matchesOf(i, matches), got, want)
			}
		}
	}
}

func matchesOf(i int, ms [][]config.APIMatch) any {
	if i < len(ms) {
		return ms[i]
	}
	return "all"
}
