package config_test

import (
	"strings"
	"testing"

	"sluice/config"
)

// TestIPItemMustBeCanonical: an exact item of a param rule on ip is
// compared byte for byte with the address the ip source gives (RFC 5952,
// an IPv4-mapped address as IPv4), so an item spelled otherwise loaded and
// never applied: { value: "2001:DB8::7", count: 0 } blocked nobody. Such a
// spelling is refused, with the form to write; the canonical one loads.
func TestIPItemMustBeCanonical(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{"2001:DB8::7", `write the address as the ip source gives it, "2001:db8::7"`},
		{"2001:db8:0:0:0:0:0:7", `write the address as the ip source gives it, "2001:db8::7"`},
		{"::ffff:192.0.2.7", `write the address as the ip source gives it, "192.0.2.7"`},
		{"192.0.2.7", ""},
		{"2001:db8::7", ""},
		{"not-an-address", ""}, // never given by ip, but no address to correct
	} {
		doc := `upstreams: {app: {targets: ["http://127.0.0.1:9001"]}}
routes:
  - { path: /api, upstream: app, resource: api }
paramRules:
  - resource: api
    param: ip
    count: 10
    items:
      - { value: "` + tc.value + `", count: 0 }
`
		_, err := config.Parse("r.yaml", []byte(doc))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.value, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s loads, and would never match the ip source's %s", tc.value, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), "r.yaml:9: paramRules[0].items[0].value: "+tc.want):
			t.Errorf("%s: error %q, want it to name r.yaml:9 and say %s", tc.value, err, tc.want)
		}
	}
}

// TestParamRulesThatApplyLoad: the checks that refuse an item, a pattern
// or a burstCount that would load and never apply
// (testdata/param_never_applies.yaml) refuse nothing that a request can
// meet: each spelling here is the one its source gives, and loads.
func TestParamRulesThatApplyLoad(t *testing.T) {
	for _, tc := range []struct{ name, rule string }{
		{"exact item", `param: header:X-Key
    items: [{ value: "k1", count: 0 }]`},
		{"composite item, canonical ip", `param: ip+header:X-Tenant
    items: [{ value: "2001:db8::7+acme", count: 0 }, { value: "192.0.2.7+acme", count: 0 }]`},
		{"composite item, escaped \\ and +", `param: ip+header:X-Tenant
    items: [{ value: '10.0.0.1+CORP\\alice', count: 0 }, { value: '10.0.0.1+a\+b', count: 0 }]`},
		{"composite item, not an address in the ip part", `param: ip+header:X-Tenant
    items: [{ value: "unix-peer+acme", count: 0 }]`},
		{"composite class may be empty-ended", `param: ip+header:X-Tenant
    items: [{ value: "10.0.0.1+", match: prefix, count: 0 }]`},
		{"host items as the source gives them", `param: host
    match: { strategy: regex, pattern: "^(shop\\.|2001:)" }
    items: [{ value: "shop.example.com", count: 0 }, { value: "2001:db8::1", count: 0 }, { value: "(?i)^SHOP", match: regex, count: 1 }]`},
		{"upper case on a header key", `param: header:X-Key
    match: { strategy: prefix, pattern: "VIP-" }
    items: [{ value: "VIP-Shop.Example.com", count: 0 }]`},
		{"an exact item before a class that takes it", `param: header:X-Key
    items: [{ value: "ab", count: 1 }, { value: "a", match: prefix, count: 5 }]`},
		{"burstCount with qps reject", `param: header:X-Key
    burstCount: 4`},
		{"query name", `param: query:id`},
	} {
		doc := `upstreams: {app: {targets: ["http://127.0.0.1:9001"]}}
routes:
  - { path: /api, upstream: app, resource: api }
paramRules:
  - resource: api
    count: 10
    ` + tc.rule + "\n"
		if _, err := config.Parse("r.yaml", []byte(doc)); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
