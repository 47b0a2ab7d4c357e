package config_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"sluice/config"
)

// TestParamKeyAndMatchDecode: a composite param, a rule's match and items'
// matches are read from the file as written (header names canonical,
// spaces around "+" ignored) and written back the same way.
func TestParamKeyAndMatchDecode(t *testing.T) {
	cfg, err := config.Parse("k.yaml", []byte(`
upstreams:
  up:
    targets: ["http://127.0.0.1:9001"]
routes:
  - path: /t
    upstream: up
    resource: t
paramRules:
  - resource: t
    param: ip + header:x-tenant
    count: 5
    items:
      - { value: "10.0.0.1+acme", count: 1 }
      - { value: "10.0.0.", match: prefix, count: 2 }
  - resource: t
    param: header:X-Real-Ip
    count: 5
    match: { strategy: cidr, pattern: "10.0.0.0/8" }
    items:
      - { value: "10.1.0.0/16", match: cidr, count: 1 }
`))
	if err != nil {
		t.Fatal(err)
	}
	r0, r1 := cfg.ParamRules[0], cfg.ParamRules[1]
	want := config.Key{{Kind: config.SourceIP}, {Kind: config.SourceHeader, Name: "X-Tenant"}}
	if !reflect.DeepEqual(r0.Param, want) || r0.Param.String() != "ip+header:X-Tenant" || !r0.Match.IsZero() {
		t.Errorf("param = %#v (%s), match %+v; want %#v", r0.Param, r0.Param, r0.Match, want)
	}
	wantItems := []config.ParamItem{{Value: "10.0.0.1+acme", Count: 1}, {Value: "10.0.0.", Match: config.MatchPrefix, Count: 2}}
	if !reflect.DeepEqual(r0.Items, wantItems) {
		t.Errorf("items = %+v, want %+v", r0.Items, wantItems)
	}
	if m := (config.ParamMatch{Strategy: config.MatchCIDR, Pattern: "10.0.0.0/8"}); r1.Match != m || r1.Items[0].Match != config.MatchCIDR {
		t.Errorf("match = %+v, item match %q; want %+v and cidr", r1.Match, r1.Items[0].Match, m)
	}
	b, err := json.Marshal(r0)
	if err != nil {
		t.Fatal(err)
	}
	var back config.ParamRule
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back.Param, r0.Param) {
		t.Errorf("JSON round trip of %s: %v, %#v", b, err, back.Param)
	}
}

// TestAppendJoined: a composite key's value reads as its parts joined by
// "+", and two different lists of parts never give the same value,
// whatever bytes they hold ("+" and "\" are escaped).
func TestAppendJoined(t *testing.T) {
	join := func(parts ...string) string {
		var b []byte
		for i, p := range parts {
			b = config.AppendJoined(b, p, i == 0)
		}
		return string(b)
	}
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"10.0.0.1", "acme"}, "10.0.0.1+acme"},
		{[]string{"a+b", "c"}, `a\+b+c`},
		{[]string{"a", "b+c"}, `a+b\+c`},
		{[]string{`a\`, "b"}, `a\\+b`},
		{[]string{"a", `\+b`}, `a+\\\+b`},
	} {
		if got := join(c.parts...); got != c.want {
			t.Errorf("join %q = %q, want %q", c.parts, got, c.want)
		}
		// SplitJoined reads every joined value back into its parts.
		if parts, ok := config.SplitJoined(c.want); !ok || !reflect.DeepEqual(parts, c.parts) {
			t.Errorf("SplitJoined(%q) = %q, %v; want %q, true", c.want, parts, ok, c.parts)
		}
	}
	// A "\" before anything but "+" or "\" is no joined value's: not ok,
	// and read as itself, so the parts rejoin to the spelling meant.
	for _, c := range []struct {
		v     string
		parts []string
	}{
		{`10.0.0.1+CORP\alice`, []string{"10.0.0.1", `CORP\alice`}},
		{`a\`, []string{`a\`}},
		{`a\x+\\b`, []string{`a\x`, `\b`}},
	} {
		if parts, ok := config.SplitJoined(c.v); ok || !reflect.DeepEqual(parts, c.parts) {
			t.Errorf("SplitJoined(%q) = %q, %v; want %q, false", c.v, parts, ok, c.parts)
		}
	}
	seen := map[string][]string{}
	for _, parts := range [][]string{
		{"a+b", "c"}, {"a", "b+c"}, {`a\`, "b"}, {"a", `\b`}, {`a\+`, "b"}, {"a", `+b`}, {`a\\`, "b"}, {"a+", "b"}, {"a", `\\+b`},
	} {
		v := join(parts...)
		if prev, dup := seen[v]; dup {
			t.Errorf("%q and %q both join to %q", prev, parts, v)
		}
		seen[v] = parts
	}
}
