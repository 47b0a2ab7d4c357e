package admin_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/admin"
	"sluice/config"
	"sluice/hotparam"
)

// TestAPIParamsMasksCredentials: the top list of a param rule that reads a
// credential (an API key) shows its values only to a reader who could
// write (the token, or without one a loopback peer): the reads are open to
// more peers than the writes, and an API key read there is a key stolen.
// The others get each value's pk, as the client's RateLimit-Policy carries
// it, and no answer to a peek (&value=), which would tell whether a guessed
// key is in use; a rule on another source is shown to all. A lift of a credential logs its pk, not it.
func TestAPIParamsMasksCredentials(t *testing.T) {
	const key = "Bearer sk-live-0123456789"
	for _, tc := range []struct {
		param, token, peer string
		hdr                []string
		query              string
		masked             bool
	}{
		{"header:X-Api-Key", "", network, nil, "", true},
		{"header:X-Api-Key", "", loopback, nil, "", false},
		{"header:X-Api-Key", "t", loopback, nil, "", true},
		{"header:X-Api-Key", "t", network, []string{"Authorization: Bearer wrong"}, "", true},
		{"header:X-Api-Key", "t", network, []string{"Authorization: Bearer t"}, "", false},
		{"header:X-Api-Key", "t", loopback, []string{"Authorization: Bearer t", "Sec-Fetch-Site: cross-site"}, "", true},
		{"header:X-Api-Key", "", network, nil, "&value=" + url.QueryEscape(key), true},
		{"header:X-Api-Key", "", loopback, nil, "&value=" + url.QueryEscape(key), false},
		{"header:Authorization", "", network, nil, "", true},
		{"ip+cookie:sid", "", network, nil, "", true},
		{"header:X-User", "", network, nil, "", false},
		{"header:X-User", "t", network, nil, "", false},
	} {
		srv, c := paramsServerOn(t, tc.param, tc.token, nil)
		for range 3 {
			c.Enter(1, userKey(key), 1)
		}
		rec := serve(srv, "GET", "/api/params?resource=login"+tc.query, tc.peer, tc.hdr...)
		b := decodeParams(t, rec)
		if tc.query != "" && tc.masked {
			// A guess gets no answer: its figures would say whether the
			// key is in use, its pk which origin it is.
			if len(b.Rules) != 1 || !b.Rules[0].Masked || len(b.Rules[0].Values) != 0 {
				t.Errorf("a peek at a credential by a reader who cannot write: %s; want the rule masked, no values", rec.Body)
			}
			continue
		}
		if len(b.Rules) != 1 || len(b.Rules[0].Values) != 1 {
			t.Fatalf("%+v: body %s", tc, rec.Body)
		}
		v := b.Rules[0].Values[0]
		if got := strings.Contains(rec.Body.String(), "sk-live"); got == tc.masked || b.Rules[0].Masked != tc.masked {
			t.Errorf("%s, token %q, from %s %q%s: value shown %v, masked %v; want masked %v: %s",
				tc.param, tc.token, tc.peer, tc.hdr, tc.query, got, b.Rules[0].Masked, tc.masked, rec.Body)
		}
		if v.PK != fakePK(key) || v.Blocks != 1 || v.Passes != 2 {
			t.Errorf("%s: pk %q, blocks %v, passes %v; want the value's pk and its figures either way", tc.param, v.PK, v.Blocks, v.Passes)
		}
	}

	var log bytes.Buffer
	srv, c := paramsServerOn(t, "header:X-Api-Key", "", &log)
	c.Enter(1, userKey(key), 1)
	if rec := serve(srv, "DELETE", "/api/params?resource=login&value="+url.QueryEscape(key), loopback); rec.Code != 200 {
		t.Fatalf("lift: %d %s", rec.Code, rec.Body)
	}
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(log.Bytes()), &line); err != nil {
		t.Fatalf("log %q: %v", log.String(), err)
	}
	if strings.Contains(log.String(), "sk-live") || line["pk"] != fakePK(key) {
		t.Errorf("the lift of a credential logged %s; want its pk and not the value", log.String())
	}
}

// TestResourcesMaskCredentialOrigins: an origin read from a credential
// (origin.from: header:X-Api-Key) is a caller's key; /api/resources lists
// it, as /api/params does, only to a reader who could write, and to the
// others as its keyed hash.
func TestResourcesMaskCredentialOrigins(t *testing.T) {
	const key = "sk-live-0123456789"
	for _, tc := range []struct {
		from, token, peer string
		hdr               []string
		masked            bool
	}{
		{"header:X-Api-Key", "", network, nil, true},
		{"header:X-Api-Key", "", loopback, nil, false},
		{"header:X-Api-Key", "t", network, []string{"Authorization: Bearer t"}, false},
		{"header:X-Api-Key", "t", loopback, nil, true},
		{"header:X-Origin", "", network, nil, false},
	} {
		src, err := config.ParseSource(tc.from)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &config.Config{Origin: config.OriginConfig{From: src}}
		srv := admin.New(admin.Options{
			Token: tc.token,
			State: func() admin.State { return admin.State{Ready: true, Config: cfg} },
			Stats: func() []admin.ResourceStats {
				return []admin.ResourceStats{{Resource: "api", Origins: []admin.NamedStats{{Name: key}}}}
			},
			PartitionKey: fakePK,
		})
		rec := serve(srv, "GET", "/api/resources", tc.peer, tc.hdr...)
		var body struct{ Resources []admin.ResourceStats }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 200 || len(body.Resources) != 1 || len(body.Resources[0].Origins) != 1 {
			t.Fatalf("%d %v: %s", rec.Code, err, rec.Body)
		}
		want := key
		if tc.masked {
			want = "pk:" + fakePK(key)
		}
		if got := body.Resources[0].Origins[0].Name; got != want {
			t.Errorf("origin from %s, token %q, peer %s %q: listed as %q, want %q", tc.from, tc.token, tc.peer, tc.hdr, got, want)
		}
	}
}

// TestCredentialsTheRulesNameAreMasked: the credentials a rules file names
// as values (a customer's API key given its own count, origins read from a
// key in limitApp) are masked in /api/rules and in the rule of
// /api/params for a reader who could not write, and /api/rules/raw then
// withholds the text, which has them wherever the file put them (comments
// and anchors included). A writer sees all.
func TestCredentialsTheRulesNameAreMasked(t *testing.T) {
	const file = `origin: { from: "header:X-Api-Key" }
upstreams: { up: { targets: ["http://127.0.0.1:1"] } }
routes: [{ path: /a, upstream: up, resource: a }]
flowRules:
  - { resource: a, limitApp: "sk-app-1", count: 5 } # the partner's key
paramRules:
  - { resource: a, param: "header:Authorization", count: 1, items: [{ value: "Bearer sk-vip-4", count: 100 }] }
`
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(path, []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	srv := admin.New(admin.Options{
		Token:      "t",
		ConfigPath: path,
		State:      func() admin.State { return admin.State{Ready: true, Config: cfg, Path: path} },
		Params: func(res string, _ []string, _ int) ([]hotparam.RuleState, bool) {
			return []hotparam.RuleState{{Rule: &cfg.ParamRules[0]}}, res == "a"
		},
		PartitionKey: fakePK,
	})
	for _, target := range []string{"/api/rules", "/api/rules/raw", "/api/params?resource=a"} {
		rec := serve(srv, "GET", target, network)
		if rec.Code != 200 || strings.Contains(rec.Body.String(), "sk-") {
			t.Errorf("GET %s without the token: %d %s; want 200 without the keys", target, rec.Code, rec.Body)
		}
		if rec := serve(srv, "GET", target, network, "Authorization: Bearer t"); rec.Code != 200 || !strings.Contains(rec.Body.String(), "sk-") {
			t.Errorf("GET %s with the token: %d %s; want the rules as written", target, rec.Code, rec.Body)
		}
	}
	if cfg.FlowRules[0].LimitApp != "sk-app-1" {
		t.Error("a read changed the rules in force")
	}
	// A file on disk that does not load (the rules in force stay) is read
	// as far as it can be: a count written "lots", a key twice, a param
	// that does not parse, or text that is not YAML.
	for _, broken := range []string{
		strings.Replace(file, "count: 5", "count: lots", 1),
		file + "origin: { from: \"header:X-Other\" }\n",
		strings.Replace(file, `param: "header:Authorization"`, `param: "header:"`, 1),
		"paramRules: [ { items: [ value: sk-x ",
	} {
		if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
			t.Fatal(err)
		}
		if rec := serve(srv, "GET", "/api/rules/raw", network); rec.Code != 200 || strings.Contains(rec.Body.String(), "sk-") {
			t.Errorf("GET /api/rules/raw of a file that does not load, without the token: %d %s", rec.Code, rec.Body)
		}
	}
}
