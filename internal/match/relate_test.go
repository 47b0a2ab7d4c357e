package match

import (
	"strings"
	"testing"
)

// TestIncludesAndDisjointAgreeWithMatch: for pairs of patterns, Includes
// and Disjoint are checked against Match over a set of sample strings:
// when Includes says yes, every sample n matches m matches; when Disjoint
// says yes, no sample matches both. And the relations that can be told are
// told (want).
func TestIncludesAndDisjointAgreeWithMatch(t *testing.T) {
	samples := []string{"", "a", "ab", "abc", "abx", "b", "bx", "xa", "yxz", "tenant-1", "tenant-free-1", "free-1",
		"10.0.0.1", "10.1.2.3", "10.255.0.1", "127.0.0.1", "127.1.0.5", "192.168.1.1", "::1", "2001:db8::1", "2001:db8:1::1", "::ffff:10.0.0.1"}
	for _, c := range []struct {
		m, n               string // "strategy pattern"
		includes, disjoint bool
	}{
		{"prefix a", "prefix ab", true, false},
		{"prefix ab", "prefix a", false, false},
		{"prefix a", "prefix b", false, true},
		{"prefix tenant-", "prefix free-", false, true},
		{"prefix tenant-", "prefix tenant-free-", true, false},
		{"contains x", "prefix bx", true, false},
		{"contains x", "contains yxz", true, false},
		{"contains x", "prefix a", false, false},
		{"prefix a", "contains b", false, false},
		{"cidr 10.0.0.0/8", "cidr 10.1.0.0/16", true, false},
		{"cidr 10.1.0.0/16", "cidr 10.0.0.0/8", false, false},
		{"cidr 127.0.0.0/8", "cidr ::ffff:127.1.0.0/112", true, false},
		{"cidr 10.0.0.0/8", "cidr 192.168.0.0/16", false, true},
		{"cidr 10.0.0.0/8", "cidr 2001:db8::/32", false, true},
		{"cidr 2001:db8::/32", "cidr 2001:db8:1::/48", true, false},
		{"exact abc", "prefix ab", false, false},
		{"exact abc", "prefix b", false, true},
		{"prefix ab", "exact abc", true, false},
		{"regex ^a", "prefix ab", false, false},
		{"prefix ab", "regex ^a", false, false},
	} {
		m, n := mustNew(t, c.m), mustNew(t, c.n)
		if got := m.Includes(&n); got != c.includes {
			t.Errorf("(%s).Includes(%s) = %v, want %v", c.m, c.n, got, c.includes)
		}
		if got := m.Disjoint(&n); got != c.disjoint {
			t.Errorf("(%s).Disjoint(%s) = %v, want %v", c.m, c.n, got, c.disjoint)
		}
		if got := n.Disjoint(&m); got != c.disjoint {
			t.Errorf("(%s).Disjoint(%s) = %v, want %v (symmetric)", c.n, c.m, got, c.disjoint)
		}
		for _, s := range samples {
			if c.includes && n.Match(s) && !m.Match(s) {
				t.Errorf("(%s) includes (%s), but %q matches only the latter", c.m, c.n, s)
			}
			if c.disjoint && n.Match(s) && m.Match(s) {
				t.Errorf("(%s) and (%s) are disjoint, but %q matches both", c.m, c.n, s)
			}
		}
	}
}

func mustNew(t *testing.T, s string) Matcher {
	t.Helper()
	strategy, pattern, _ := strings.Cut(s, " ")
	m, err := New(strategy, pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
