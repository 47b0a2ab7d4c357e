package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCredentialSources: the sources whose values the admin API keeps from
// a reader who could not write. Authorization is caught by "auth"; a
// composite key is one if any part is.
func TestCredentialSources(t *testing.T) {
	for _, tc := range []struct {
		param string
		want  bool
	}{
		{"header:Authorization", true},
		{"header:proxy-authorization", true},
		{"header:Cookie", true},
		{"cookie:lang", true},
		{"header:X-Api-Key", true},
		{"header:X_API_KEY", true},
		{"query:access_token", true},
		{"query:apiKey", true},
		{"query:sig", false},
		{"query:pwd", true},
		{"query:X-Amz-Signature", true},
		{"path:sessionId", true},
		{"header:X-Password", true},
		{"header:X-Jwt-Assertion", true},
		{"ip+header:X-Auth-Token", true},
		{"header:X-Tenant", false},
		{"query:id", false},
		{"path:orderId", false},
		{"host", false},
		{"ip", false},
		{"ip+header:X-Tenant", false},
	} {
		k, err := ParseKey(tc.param)
		if err != nil {
			t.Fatal(err)
		}
		if got := k.Credential(); got != tc.want {
			t.Errorf("%s: Credential() = %v, want %v", tc.param, got, tc.want)
		}
	}
}

// TestWithoutCredentials: the credentials a rules file names as values
// (an item's API key, origins read from a key) are masked in the copy, and
// the rules are not changed; a file that names none is returned as it is.
func TestWithoutCredentials(t *testing.T) {
	cfg, err := Parse("rules.yaml", []byte(`
origin: { from: "header:X-Api-Key" }
upstreams: { up: { targets: ["http://127.0.0.1:1"] } }
routes: [{ path: /a, upstream: up, resource: a }]
flowRules:
  - { resource: a, limitApp: "sk-app-1", count: 5 }
  - { resource: a, limitApp: other, count: 1 }
authorityRules:
  - { resource: a, strategy: black, limitApp: "sk-bad-2, sk-bad-3" }
paramRules:
  - { resource: a, param: "header:Authorization", count: 1, items: [{ value: "Bearer sk-vip-4", count: 100 }] }
  - { resource: a, param: "header:X-Tenant", count: 1, items: [{ value: acme, count: 100 }] }
`))
	if err != nil {
		t.Fatal(err)
	}
	out, masked := cfg.WithoutCredentials()
	b, _ := json.Marshal(out)
	if !masked || strings.Contains(string(b), "sk-") || !strings.Contains(string(b), "acme") || !strings.Contains(string(b), `"other"`) {
		t.Errorf("masked %v: %s; want no sk- value, acme and other kept", masked, b)
	}
	if cfg.FlowRules[0].LimitApp != "sk-app-1" || cfg.ParamRules[0].Items[0].Value != "Bearer sk-vip-4" || cfg.AuthorityRules[0].LimitApp != "sk-bad-2, sk-bad-3" {
		t.Error("WithoutCredentials changed the rules it was given")
	}
	cfg.Origin.From = Source{Kind: SourceHeader, Name: "X-Origin"}
	cfg.ParamRules = cfg.ParamRules[1:]
	if out, masked := cfg.WithoutCredentials(); masked || out != cfg {
		t.Errorf("a file naming no credential: masked %v, a copy %v", masked, out != cfg)
	}
}
