package admin_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"sluice/config"
)

// routeDoc is a rules file whose route has a nested blockResponse; tests
// splice a layout of that block into it.
const routeDoc = `listen: ":8080"
upstreams:
  orders:
    targets: ["http://127.0.0.1:9001"]
routes:
  - path: /orders/*
    upstream: orders
    resource: orders
    blockResponse:
%s# after the route
flowRules:
  - resource: orders
    count: 100
`

// patchDoc writes doc as the fixture's rules file, PUTs patch on the rule
// at path (with the file's ETag) and returns the file saved, failing the
// test unless the edit is answered 200.
func (f *fixture) patchDoc(t *testing.T, doc, path, patch string) []byte {
	t.Helper()
	if err := os.WriteFile(f.path, []byte(doc), 0o640); err != nil {
		t.Fatal(err)
	}
	code, resp, _ := f.do(t, "PUT", path, map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, patch)
	if code != http.StatusOK {
		t.Fatalf("PUT %s %s: %d %s, want 200", path, patch, code, resp)
	}
	return f.file(t)
}

// A literal block body may hold blank and '#' lines: they are the body's,
// and an edit of the rule replaces all of them, while the comment after the
// rule stays once, where it was.
func TestEditRuleWithMultiLineBody(t *testing.T) {
	const body = "      body: |\n        {\"error\": \"slow down\"}\n\n        # not a comment\n        try later\n\n"
	const oldBody = "{\"error\": \"slow down\"}\n\n# not a comment\ntry later\n"
	for _, tc := range []struct {
		name, patch, wantBody string
	}{
		{"new body", `{"blockResponse": {"body": "busy\n\nretry\n"}}`, "busy\n\nretry\n"},
		{"new field", `{"prioritized": "true"}`, oldBody},
		{"sibling of body", `{"blockResponse": {"status": 503}}`, oldBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			saved := f.patchDoc(t, strings.Replace(routeDoc, "%s", body, 1), "/api/rules/routes/0", tc.patch)
			cfg, err := config.Parse(f.path, saved)
			if err != nil {
				t.Fatalf("the saved file does not load: %v\n%s", err, saved)
			}
			if got := cfg.Routes[0].BlockResponse.Body; got != tc.wantBody {
				t.Errorf("saved body %q, want %q:\n%s", got, tc.wantBody, saved)
			}
			if n := strings.Count(string(saved), "# after the route\n"); n != 1 {
				t.Errorf("the comment after the rule is there %d times, want 1:\n%s", n, saved)
			}
		})
	}
}

// A JSON edit is an RFC 7396 merge patch, recursively: a nested object
// merges member by member, a nested null removes that member, and nulls in
// an object that has nothing to merge into are dropped, not written.
func TestEditMergePatchIsRecursive(t *testing.T) {
	const block = "      status: 503\n      body: busy\n      contentType: text/plain\n"
	for _, tc := range []struct {
		name, path, patch string
		want, notWant     []string
	}{
		{"nested member", "/api/rules/routes/0", `{"blockResponse": {"status": 500}}`,
			[]string{"status: 500", "body: busy", "contentType: text/plain"}, nil},
		{"nested null", "/api/rules/routes/0", `{"blockResponse": {"contentType": null}}`,
			[]string{"status: 503", "body: busy"}, []string{"contentType", "null"}},
		{"null in a new object", "/api/rules/flowRules/0", `{"clusterConfig": {"thresholdType": "global", "fallbackToLocalWhenFail": null}}`,
			[]string{"clusterConfig:\n      thresholdType: global\n", "contentType: text/plain"}, []string{"fallbackToLocalWhenFail", "null"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			saved := string(f.patchDoc(t, strings.Replace(routeDoc, "%s", block, 1), tc.path, tc.patch))
			for _, w := range tc.want {
				if !strings.Contains(saved, w) {
					t.Errorf("after %s the file lacks %q:\n%s", tc.patch, w, saved)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(saved, w) {
					t.Errorf("after %s the file still has %q:\n%s", tc.patch, w, saved)
				}
			}
		})
	}
}

// ordersHead is a rules file's head, up to its flowRules: one route of
// resource orders; tests append the rules.
const ordersHead = `listen: ":8080"
upstreams:
  orders:
    targets: ["http://127.0.0.1:9001"]
routes:
  - path: /orders/*
    upstream: orders
    resource: orders
flowRules:
`

// A value that carries an anchor keeps it when edited, in place or when the
// rule is re-encoded, so the alias naming it still loads (and follows).
func TestEditKeepsAnchor(t *testing.T) {
	const doc = ordersHead + `  - resource: orders
    count: &c 100
  - resource: orders
    limitApp: mobile
    count: *c
`
	for _, tc := range []struct{ name, patch string }{
		{"value in place", `{"count": 50}`},
		{"rule re-encoded", `{"count": 50, "dryRun": true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			saved := f.patchDoc(t, doc, "/api/rules/flowRules/0", tc.patch)
			cfg, err := config.Parse(f.path, saved)
			if err != nil {
				t.Fatalf("the saved file does not load: %v\n%s", err, saved)
			}
			if !strings.Contains(string(saved), "count: &c 50\n") || cfg.FlowRules[0].Count != 50 || cfg.FlowRules[1].Count != 50 {
				t.Errorf("want count: &c 50 followed by the alias; file:\n%s", saved)
			}
		})
	}
}

// A CRLF file stays CRLF: the edited rule's lines, encoded anew, end in
// CRLF as the rest of the file does (they lost their CR before), and a
// file without a final newline keeps none.
func TestEditKeepsCRLF(t *testing.T) {
	f := newFixture(t, "")
	doc := strings.ReplaceAll(strings.Replace(routeDoc, "%s", "      status: 503\n", 1), "\n", "\r\n")
	for _, tc := range []struct{ name, doc string }{
		{"final newline", doc},
		{"no final newline", strings.TrimSuffix(doc, "\r\n")},
	} {
		got := string(f.patchDoc(t, tc.doc, "/api/rules/flowRules/0", `{"count": 7, "dryRun": true}`))
		if !strings.Contains(got, "count: 7\r\n") || !strings.Contains(got, "dryRun: true") {
			t.Fatalf("%s: the edit is not in the file:\n%q", tc.name, got)
		}
		if bare := strings.Count(got, "\n") - strings.Count(got, "\r\n"); bare != 0 {
			t.Errorf("%s: %d lines end in a bare LF in a CRLF file:\n%q", tc.name, bare, got)
		}
		if strings.HasSuffix(got, "\n") != strings.HasSuffix(tc.doc, "\n") {
			t.Errorf("%s: the final newline changed:\n%q", tc.name, got)
		}
	}
}

// A rule that merges another's fields (<<: *base) keeps its merge key as
// written when the edit re-encodes it: yaml.v3 wrote "!!merge <<: *base".
func TestEditKeepsMergeKey(t *testing.T) {
	const doc = ordersHead + `  - &base
    resource: orders
    count: 100
  - <<: *base
    limitApp: mobile
`
	f := newFixture(t, "")
	saved := string(f.patchDoc(t, doc, "/api/rules/flowRules/1", `{"count": 7, "dryRun": true}`))
	if strings.Contains(saved, "!!merge") || !strings.Contains(saved, "  - <<: *base\n") {
		t.Errorf("the merge key is not kept as written:\n%s", saved)
	}
	cfg, err := config.Parse(f.path, []byte(saved))
	if err != nil {
		t.Fatalf("the saved file does not load: %v\n%s", err, saved)
	}
	if r := cfg.FlowRules[1]; r.Resource != "orders" || r.Count != 7 || r.LimitApp != "mobile" || !r.DryRun {
		t.Errorf("the edited rule reads %+v", r)
	}
}

// A body whose text holds a line "!!merge <<: ..." is the user's text: the
// edit writes it as given. Rewriting the encoded lines to keep merge keys
// as written also rewrote it, into "<<: keep this line".
func TestEditKeepsBodyTextThatLooksLikeAMergeKey(t *testing.T) {
	const text = "slow down\n!!merge <<: keep this line\n"
	f := newFixture(t, "")
	saved := string(f.patchDoc(t, ordersHead+"  - resource: orders\n    count: 100\n", "/api/rules/routes/0",
		`{"blockResponse": {"body": "slow down\n!!merge <<: keep this line\n"}}`))
	cfg, err := config.Parse(f.path, []byte(saved))
	if err != nil {
		t.Fatalf("the saved file does not load: %v\n%s", err, saved)
	}
	if br := cfg.Routes[0].BlockResponse; br.Body != text {
		t.Errorf("the route's body reads %+v, want %q:\n%s", br, text, saved)
	}
}
