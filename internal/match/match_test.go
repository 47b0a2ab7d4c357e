package match_test

import (
	"testing"

	"sluice/internal/match"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		strategy, pattern string
		yes, no           []string
	}{
		{match.Exact, "102", []string{"102"}, []string{"1020", "10", " 102", ""}},
		{match.Prefix, "9", []string{"9", "91", "9abc"}, []string{"19", "", "a9"}},
		{match.Contains, "adm", []string{"adm", "x-admin", "badm"}, []string{"ad", "ADM", ""}},
		// Unanchored unless the pattern says so.
		{match.Regex, `\d{3}`, []string{"123", "a1234b"}, []string{"12", "abc"}},
		{match.Regex, `^v[0-9]+$`, []string{"v1", "v42"}, []string{"xv1", "v1x", "v"}},
		{match.CIDR, "10.0.0.0/8", []string{"10.1.2.3", "::ffff:10.1.2.3"}, []string{"11.0.0.1", "10.1.2.3:80", "10.1.2.3%eth0", "x", ""}},
		{match.CIDR, "192.0.2.7", []string{"192.0.2.7"}, []string{"192.0.2.8"}},
		{match.CIDR, "2001:db8::/32", []string{"2001:db8::1", "2001:DB8:0::7"}, []string{"2001:db9::1", "10.0.0.1"}},
		// A mapped prefix is its IPv4 prefix: it matches the canonical address.
		{match.CIDR, "::ffff:10.0.0.0/104", []string{"10.9.9.9"}, []string{"11.0.0.1"}},
	}
	for _, c := range cases {
		m, err := match.New(c.strategy, c.pattern)
		if err != nil {
			t.Fatalf("%s %q: %v", c.strategy, c.pattern, err)
		}
		for _, v := range c.yes {
			if !m.Match(v) {
				t.Errorf("%s %q: %q does not match, want a match", c.strategy, c.pattern, v)
			}
		}
		for _, v := range c.no {
			if m.Match(v) {
				t.Errorf("%s %q: %q matches, want none", c.strategy, c.pattern, v)
			}
		}
	}
	var all match.Matcher
	if !all.All() || !all.Match("") || !all.Match("x") {
		t.Error("the zero Matcher must match everything")
	}
}

func TestNewErrors(t *testing.T) {
	cases := []struct{ strategy, pattern, want string }{
		{match.Regex, "(a", "invalid regexp: missing closing ): `(a`"},
		{match.Regex, "", "must not be empty with strategy regex"},
		{match.Prefix, "", "must not be empty with strategy prefix"},
		{match.CIDR, "10.0.0.0/33", `must be a CIDR (10.0.0.0/8, 2001:db8::/32) or an IP address, got "10.0.0.0/33"`},
		{match.CIDR, "ten", `must be a CIDR (10.0.0.0/8, 2001:db8::/32) or an IP address, got "ten"`},
		{"glob", "a*", `unknown strategy "glob" (exact, prefix, contains, regex, cidr)`},
	}
	for _, c := range cases {
		if _, err := match.New(c.strategy, c.pattern); err == nil || err.Error() != c.want {
			t.Errorf("New(%q, %q) = %v, want %q", c.strategy, c.pattern, err, c.want)
		}
	}
}

func TestMatchAllocatesNothing(t *testing.T) {
	for _, c := range []struct{ strategy, pattern, v string }{
		{match.Exact, "102", "102"}, {match.Prefix, "9", "912"}, {match.Contains, "b", "abc"},
		{match.Regex, `^user-[0-9]+$`, "user-42"}, {match.CIDR, "10.0.0.0/8", "10.1.2.3"},
		{match.CIDR, "2001:db8::/32", "2001:db8::1"},
	} {
		m, err := match.New(c.strategy, c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		m.Match(c.v)
		if n := testing.AllocsPerRun(1000, func() { m.Match(c.v) }); n != 0 {
			t.Errorf("%s: %v allocs per match, want 0", c.strategy, n)
		}
	}
}

func TestParsePrefix(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3/8": "10.0.0.0/8", "192.0.2.7": "192.0.2.7/32", "::1": "::1/128",
		"::ffff:10.0.0.0/104": "10.0.0.0/8", "fe80::1%eth0": "fe80::1/128",
	} {
		p, ok := match.ParsePrefix(in)
		if !ok || p.String() != want {
			t.Errorf("ParsePrefix(%q) = %v, %v; want %s", in, p, ok, want)
		}
	}
	if _, ok := match.ParsePrefix("nope"); ok {
		t.Error(`ParsePrefix("nope") ok, want not`)
	}
}
