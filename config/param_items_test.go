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
