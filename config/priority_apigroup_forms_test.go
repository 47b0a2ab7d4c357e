package config_test

import (
	"strings"
	"testing"

	"sluice/config"
)

const rvRoutes = `
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
		_, err := config.Parse("g.yaml", []byte(rvRoutes+`
apiGroups:
  - name: g
    match: [`+m+`]
`))
		if err == nil || !strings.Contains(err.Error(), "apiGroups[0].match[0]") {
			t.Errorf("%s: err %v, want it refused", m, err)
		}
	}
	for _, m := range []string{`{ exact: "/order/%7Bid%7D" }`, `{ prefix: "/order/" }`, `{ prefix: "/caf%C3%A9" }`, `{ exact: "/a*b" }`} {
		if _, err := config.Parse("g.yaml", []byte(rvRoutes+`
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
