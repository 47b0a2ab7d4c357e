package config_test

import (
	"strings"
	"testing"

	"sluice/config"
)

const groupRoutes = `
upstreams:
  up:
    targets: ["http://127.0.0.1:9001"]
routes:
  - { path: "/order/{id}", upstream: up, resource: get-order }
`

// TestAPIGroupPathNeverMatches: an exact or prefix entry that no
// normalized request path can ever start with or equal (a route-style
// {param}, a malformed escape) is a group rule that limits nothing: it is
// refused with its line, like a bad regex.
func TestAPIGroupPathNeverMatches(t *testing.T) {
	for _, m := range []string{
		`{ exact: "/order/{id}" }`,
		`{ prefix: "/order/{id}/" }`,
	} {
		_, err := config.Parse("g.yaml", []byte(groupRoutes+`
apiGroups:
  - name: g
    match: [`+m+`]
`))
		if err == nil || !strings.Contains(err.Error(), "apiGroups[0].match[0]") {
			t.Errorf("%s: err %v, want it refused", m, err)
		}
	}
	for _, m := range []string{`{ exact: "/order/%7Bid%7D" }`, `{ prefix: "/order/" }`, `{ prefix: "/caf%C3%A9" }`, `{ exact: "/a*b" }`} {
		if _, err := config.Parse("g.yaml", []byte(groupRoutes+`
apiGroups:
  - name: g
    match: [`+m+`]
`)); err != nil {
			t.Errorf("%s: %v, want it accepted", m, err)
		}
	}
}

// TestPriorityValueForm: a prioritized "ip=VALUE" or "host=VALUE"
// whose value the source never gives (the ip source writes addresses in
// one canonical form, the host source lower-case without port) would
// prioritize no call at all: it is refused as such items are.
func TestPriorityValueForm(t *testing.T) {
	for _, p := range []string{"host=API.example.com", "ip=::ffff:10.0.0.1", "ip=2001:DB8::1", "host=api.example.com:8080"} {
		_, err := config.Parse("p.yaml", []byte(`
upstreams:
  up:
    targets: ["http://127.0.0.1:9001"]
routes:
  - { path: "/pay", upstream: up, prioritized: "`+p+`" }
`))
		if err == nil {
			t.Errorf("prioritized %q accepted; no request gives that value", p)
		} else {
			t.Logf("%s: %v", p, err)
		}
	}
	for _, p := range []string{"host=api.example.com", "ip=10.0.0.1", "ip=2001:db8::1", "header:X-P=High"} {
		if _, err := config.Parse("p.yaml", []byte(`
upstreams:
  up:
    targets: ["http://127.0.0.1:9001"]
routes:
  - { path: "/pay", upstream: up, prioritized: "`+p+`" }
`)); err != nil {
			t.Errorf("prioritized %q: %v", p, err)
		}
	}
}

// TestOriginNamesInTheSourcesForm: with origin.from ip or host, a flow or
// authority rule's limitApp names origins as the source gives them; any
// other spelling names no caller and is refused. A flow rule's keywords
// default and other stand alone: in a list they would be origin names.
func TestOriginNamesInTheSourcesForm(t *testing.T) {
	tests := []struct {
		from, rule, want string // want "": loads
	}{
		{"ip", `flowRules: [{resource: get-order, limitApp: "::ffff:10.0.0.1", count: 1}]`, `flowRules[0].limitApp: origin.from ip gives "10.0.0.1", never "::ffff:10.0.0.1"`},
		{"ip", `flowRules: [{resource: get-order, limitApp: "10.0.0.1, 2001:DB8::1", count: 1}]`, `gives "2001:db8::1", never "2001:DB8::1"`},
		{"host", `flowRules: [{resource: get-order, limitApp: "API.example.com", count: 1}]`, `gives "api.example.com", never "API.example.com"`},
		{"host", `authorityRules: [{resource: get-order, strategy: black, limitApp: "a.example.com, b.example.com:443"}]`, `authorityRules[0].limitApp: origin.from host gives "b.example.com", never "b.example.com:443"`},
		{"header:X-App", `flowRules: [{resource: get-order, limitApp: "a, default", count: 1}]`, `flowRules[0].limitApp: "default" stands alone`},
		{"header:X-App", `flowRules: [{resource: get-order, limitApp: "other,b", count: 1}]`, `"other" stands alone`},
		{"ip", `flowRules: [{resource: get-order, limitApp: "10.0.0.1, 2001:db8::1", count: 1}]`, ""},
		{"host", `authorityRules: [{resource: get-order, strategy: white, limitApp: "api.example.com"}]`, ""},
		{"header:X-App", `flowRules: [{resource: get-order, limitApp: "API.Example.com:8080", count: 1}]`, ""},
		{"ip", `flowRules: [{resource: get-order, limitApp: other, count: 1}, {resource: get-order, limitApp: default, count: 9}]`, ""},
	}
	for _, tt := range tests {
		_, err := config.Parse("o.yaml", []byte(groupRoutes+"origin: {from: \""+tt.from+"\"}\n"+tt.rule+"\n"))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s / %s: %v, want it loaded", tt.from, tt.rule, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s / %s: err %v, want %q", tt.from, tt.rule, err, tt.want)
		}
	}
}
