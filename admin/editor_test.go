package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sluice/admin"
	"sluice/config"
)

func TestEditValidRewritesOnlyThatRule(t *testing.T) {
	f := newFixture(t, "")
	before := string(f.file(t))
	code, body, etag := f.do(t, "PUT", "/api/rules/flowRules/1",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, `{"count": 35, "limitApp": "mobile"}`)
	if code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	after := string(f.file(t))
	// Only the changed value's bytes change; limitApp was sent unchanged.
	want := strings.Replace(before, "    limitApp: mobile\n    count: 20\n", "    limitApp: mobile\n    count: 35\n", 1)
	if after != want {
		t.Fatalf("file after edit:\n%s\nwant:\n%s", after, want)
	}
	if f.reloads.Load() != 1 {
		t.Errorf("Reload called %d times, want 1", f.reloads.Load())
	}
	if etag == "" || etag != f.etag(t) {
		t.Errorf("returned ETag %q does not name the new file (%q)", etag, f.etag(t))
	}
}

func TestEditKeepsCommentsInsideAndAroundTheRule(t *testing.T) {
	f := newFixture(t, "")
	before := string(f.file(t))
	code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/0",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, `{"count": 250}`)
	if code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	after := string(f.file(t))
	want := strings.Replace(before, "count: 100 # raised for the sale", "count: 250 # raised for the sale", 1)
	if after != want {
		t.Fatalf("file after edit:\n%s\nwant:\n%s", after, want)
	}
}

// Edits that change a rule's shape (a new or removed field, a nested value)
// re-encode that rule's lines with yaml.v3; the rest of the file stays byte
// for byte. Edits of existing one-line values change only those values.
func TestEditShapes(t *testing.T) {
	rule1 := "  - resource: orders   # second rule, per origin\n    limitApp: mobile\n    count: 20\n"
	for _, tc := range []struct {
		name, patch, old, new string
	}{
		{"two values in place", `{"count": 0.5, "limitApp": "mobile, web"}`, rule1,
			"  - resource: orders   # second rule, per origin\n    limitApp: mobile, web\n    count: 0.5\n"},
		{"value needing quotes", `{"limitApp": "a: b"}`, rule1,
			"  - resource: orders   # second rule, per origin\n    limitApp: 'a: b'\n    count: 20\n"},
		{"new field", `{"dryRun": true}`, rule1,
			"  - resource: orders # second rule, per origin\n    limitApp: mobile\n    count: 20\n    dryRun: true\n"},
		{"removed field", `{"limitApp": null}`, rule1,
			"  - resource: orders # second rule, per origin\n    count: 20\n"},
		{"nested value", `{"clusterConfig": {"thresholdType": "global"}}`, rule1,
			"  - resource: orders # second rule, per origin\n    limitApp: mobile\n    count: 20\n    clusterConfig:\n      thresholdType: global\n"},
		{"nothing changed", `{"count": 20.0}`, rule1, rule1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			before := string(f.file(t))
			code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/1",
				map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, tc.patch)
			if code != http.StatusOK {
				t.Fatalf("PUT %s: %d %s", tc.patch, code, body)
			}
			if !strings.Contains(before, tc.old) {
				t.Fatalf("fixture lacks %q", tc.old)
			}
			if want := strings.Replace(before, tc.old, tc.new, 1); string(f.file(t)) != want {
				t.Fatalf("file after %s:\n%s\nwant:\n%s", tc.patch, f.file(t), want)
			}
			if wantReloads := int32(map[bool]int{true: 0, false: 1}[tc.old == tc.new]); f.reloads.Load() != wantReloads {
				t.Errorf("Reload called %d times, want %d", f.reloads.Load(), wantReloads)
			}
		})
	}
}

func TestEditWithYAMLBodyReplacesTheRule(t *testing.T) {
	f := newFixture(t, "")
	before := string(f.file(t))
	code, body, _ := f.do(t, "PUT", "/api/rules/degradeRules/0",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/yaml"},
		"resource: orders\nstrategy: errorCount\nthreshold: 10\nretryTimeoutMs: 2000\n")
	if code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	old := "  - resource: orders\n    strategy: errorRatio\n    threshold: 0.5 # half the calls failing trips it\n    retryTimeoutMs: 5000\n"
	neu := "  - resource: orders\n    strategy: errorCount\n    threshold: 10\n    retryTimeoutMs: 2000\n"
	if want := strings.Replace(before, old, neu, 1); string(f.file(t)) != want {
		t.Fatalf("file after edit:\n%s\nwant:\n%s", f.file(t), want)
	}
}

func TestInvalidEditLeavesFileUntouched(t *testing.T) {
	f := newFixture(t, "")
	before := f.file(t)
	fi, _ := os.Stat(f.path)
	code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/0",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, `{"count": -1}`)
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("PUT count -1: %d %s, want 422", code, body)
	}
	var e struct {
		Error string
		Lines []string
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || len(e.Lines) == 0 {
		t.Fatalf("422 body %s: want error lines (%v)", body, err)
	}
	if !strings.Contains(e.Lines[0], f.path+":17: flowRules[0].count") {
		t.Errorf("error line %q does not say file:line and the field", e.Lines[0])
	}
	if after := f.file(t); string(after) != string(before) {
		t.Fatalf("rules.yaml changed by a rejected edit:\n%s", after)
	}
	if fi2, _ := os.Stat(f.path); !fi2.ModTime().Equal(fi.ModTime()) {
		t.Errorf("rules.yaml was rewritten (mtime changed)")
	}
	if f.reloads.Load() != 0 {
		t.Errorf("Reload called after a rejected edit")
	}
	entries, _ := os.ReadDir(strings.TrimSuffix(f.path, "rules.yaml"))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only rules.yaml (temp file left behind?)", len(entries))
	}
}

func TestStaleEditIsRefusedWith409(t *testing.T) {
	f := newFixture(t, "")
	etag := f.etag(t)
	// Someone else edits the file after the editor read it.
	changed := strings.Replace(string(f.file(t)), "count: 20", "count: 21", 1)
	if err := os.WriteFile(f.path, []byte(changed), 0o640); err != nil {
		t.Fatal(err)
	}
	code, body, cur := f.do(t, "PUT", "/api/rules/flowRules/0",
		map[string]string{"If-Match": etag, "Content-Type": "application/json"}, `{"count": 5}`)
	if code != http.StatusConflict {
		t.Fatalf("stale PUT: %d %s, want 409", code, body)
	}
	if string(f.file(t)) != changed {
		t.Fatal("a stale edit changed the file")
	}
	if cur != f.etag(t) {
		t.Errorf("409 ETag %q, want the current one %q", cur, f.etag(t))
	}
	// The same edit based on the current version goes through.
	if code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/0",
		map[string]string{"If-Match": cur, "Content-Type": "application/json"}, `{"count": 5}`); code != 200 {
		t.Fatalf("PUT with current ETag: %d %s", code, body)
	}
}

// Validation takes time (a full config parse); a save someone makes
// meanwhile is not overwritten: the edit gets 409 and writes nothing.
func TestEditDuringValidationIsRefusedWith409(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	orig, err := os.ReadFile("testdata/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, orig, 0o640); err != nil {
		t.Fatal(err)
	}
	colleague := strings.Replace(string(orig), "count: 20", "count: 25", 1)
	var reloads atomic.Int32
	saved := false
	f := &fixture{path: path, srv: admin.New(admin.Options{
		ConfigPath: path,
		Reload:     func() { reloads.Add(1) },
		Validate: func(p string, data []byte) error {
			if !saved { // the colleague's save lands while the edit is checked
				saved = true
				if err := os.WriteFile(path, []byte(colleague), 0o640); err != nil {
					t.Error(err)
				}
			}
			return validate(p, data)
		},
	})}
	f.ts = httptest.NewServer(f.srv.Handler())
	defer f.ts.Close()
	code, body, cur := f.do(t, "PUT", "/api/rules/flowRules/0",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, `{"count": 50}`)
	if code != http.StatusConflict {
		t.Errorf("PUT while the file changed: %d %s, want 409", code, body)
	}
	if got := string(f.file(t)); got != colleague {
		t.Errorf("the file is not as the colleague saved it:\n%s", got)
	}
	if cur != f.etag(t) {
		t.Errorf("409 ETag %q, want the current one %q", cur, f.etag(t))
	}
	if n := reloads.Load(); n != 0 {
		t.Errorf("Reload called %d times, want 0", n)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("the directory holds %d files, want rules.yaml alone (no temporary file left)", len(entries))
	}
}

func TestEditRequestErrors(t *testing.T) {
	f := newFixture(t, "")
	tag := f.etag(t)
	json := map[string]string{"If-Match": tag, "Content-Type": "application/json"}
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		body       string
		want       int
	}{
		{"no If-Match", "/api/rules/flowRules/0", map[string]string{"Content-Type": "application/json"}, `{"count":1}`, 428},
		{"unknown section", "/api/rules/upstreams/0", json, `{"count":1}`, 404},
		{"index past the end", "/api/rules/flowRules/2", json, `{"count":1}`, 404},
		{"section absent from file", "/api/rules/paramRules/0", json, `{"count":1}`, 404},
		{"negative index", "/api/rules/flowRules/-1", json, `{"count":1}`, 404},
		{"not an object", "/api/rules/flowRules/0", json, `[1]`, 400},
		{"bad YAML body", "/api/rules/flowRules/0", map[string]string{"If-Match": tag, "Content-Type": "application/yaml"}, "a: [", 400},
		// yaml.Unmarshal read the first document alone: 200, the second dropped.
		{"two YAML documents", "/api/rules/flowRules/0", map[string]string{"If-Match": tag, "Content-Type": "application/yaml"}, "resource: orders\ncount: 5\n---\nadmin: {token: x}\n", 400},
		{"unknown field", "/api/rules/flowRules/0", json, `{"cuont":1}`, 422},
		{"cross-origin", "/api/rules/flowRules/0", map[string]string{"If-Match": tag, "Content-Type": "application/json", "Origin": "http://evil.example"}, `{"count":1}`, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := string(f.file(t))
			if code, body, _ := f.do(t, "PUT", tc.path, tc.hdr, tc.body); code != tc.want {
				t.Fatalf("%d %s, want %d", code, body, tc.want)
			}
			if string(f.file(t)) != before {
				t.Fatal("file changed")
			}
		})
	}
}

func TestEditKeepsFileMode(t *testing.T) {
	f := newFixture(t, "")
	if code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/0",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, `{"count": 7}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	fi, err := os.Stat(f.path)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode after edit: %v %v, want 0640", fi.Mode(), err)
	}
}

// An edit whose body is over 1 MiB, or whose result would be a rules file
// over 8 MiB (config.MaxDocumentBytes), is refused with 413 and a message
// that names the limit; the file is left as it was and no reload is asked.
func TestOversizedEditIsRefused(t *testing.T) {
	f := newFixture(t, "")
	// A file a few bytes under the limit: the second edit adds 6 bytes.
	pad := config.MaxDocumentBytes - len(f.file(t)) - 4
	padded := string(f.file(t)) + "#" + strings.Repeat("x", pad-2) + "\n"
	for _, tc := range []struct {
		name, body, want string
	}{
		{"body over 1 MiB", `{"count": 5, "x": "` + strings.Repeat("y", 1<<20) + `"}`,
			"admin: the request body is over the 1 MiB limit of a rule edit; nothing was written"},
		{"file over 8 MiB", `{"count": 100000000}`,
			fmt.Sprintf("admin: the edited rules file is %d bytes, over the 8 MiB limit of a rules document; nothing was written", config.MaxDocumentBytes+2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(f.path, []byte(padded), 0o640); err != nil {
				t.Fatal(err)
			}
			// If-Match: * spares reading 8 MiB for the ETag.
			code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/0",
				map[string]string{"If-Match": "*", "Content-Type": "application/json"}, tc.body)
			var e struct{ Error string }
			_ = json.Unmarshal([]byte(body), &e)
			if code != http.StatusRequestEntityTooLarge || e.Error != tc.want {
				t.Errorf("PUT: %d %.300s, want 413 %q", code, body, tc.want)
			}
			if string(f.file(t)) != padded {
				t.Error("the file changed")
			}
			if f.reloads.Load() != 0 {
				t.Error("a reload was asked")
			}
		})
	}
}

// TestEditAPIGroup: the editor lists the file's apiGroups and edits one like
// a rule: a new match list is written; an invalid regex is refused with its
// file:line and the file stays as it was.
func TestEditAPIGroup(t *testing.T) {
	f := newFixture(t, "")
	doc := string(f.file(t)) + "\napiGroups:\n  - name: orders-api\n    match: [{ prefix: /orders/ }]\n"
	if err := os.WriteFile(f.path, []byte(doc), 0o640); err != nil {
		t.Fatal(err)
	}
	code, body, _ := f.do(t, "GET", "/api/rules/raw", nil, "")
	var raw struct{ Sections map[string][]map[string]any }
	if code != 200 || json.Unmarshal([]byte(body), &raw) != nil || len(raw.Sections["apiGroups"]) != 1 || raw.Sections["apiGroups"][0]["name"] != "orders-api" {
		t.Fatalf("GET /api/rules/raw: %d %s, want apiGroups[0] orders-api", code, body)
	}
	code, body, _ = f.do(t, "PUT", "/api/rules/apiGroups/0",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, `{"match": [{"regex": "^/v[0-9"}]}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "apiGroups[0].match[0].regex: invalid regexp") {
		t.Fatalf("PUT a bad regex: %d %s, want 422 naming apiGroups[0].match[0].regex", code, body)
	}
	if string(f.file(t)) != doc {
		t.Fatalf("rules.yaml changed by a rejected edit:\n%s", f.file(t))
	}
	code, body, _ = f.do(t, "PUT", "/api/rules/apiGroups/0",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, `{"match": [{"prefix": "/orders/"}, {"exact": "/cart"}]}`)
	if code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	cfg, err := config.Parse(f.path, f.file(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.APIGroups[0].Match; len(got) != 2 || got[1].Exact != "/cart" {
		t.Errorf("apiGroups[0].match after the edit: %+v", got)
	}
}

// The editor edits a route's prioritized and occupyTimeoutMs like a rule's
// fields: "SOURCE=VALUE" and "true" as strings, validated like the file.
func TestEditRoutePrioritized(t *testing.T) {
	f := newFixture(t, "")
	put := func(fields string) (int, string) {
		code, body, _ := f.do(t, "PUT", "/api/rules/routes/0",
			map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, fields)
		return code, body
	}
	if code, body := put(`{"prioritized": "heder:X-Priority=high"}`); code != http.StatusUnprocessableEntity ||
		!strings.Contains(body, `routes[0].prioritized: invalid prioritized \"heder:X-Priority=high\"`) {
		t.Fatalf("PUT a bad source: %d %s, want 422 naming routes[0].prioritized", code, body)
	}
	if code, body := put(`{"occupyTimeoutMs": 0}`); code != http.StatusUnprocessableEntity ||
		!strings.Contains(body, "routes[0].occupyTimeoutMs: must be in 1..60000, got 0") {
		t.Fatalf("PUT occupyTimeoutMs 0: %d %s, want 422", code, body)
	}
	for _, c := range []struct {
		fields string
		want   config.Priority
	}{
		{`{"prioritized": "header:X-Priority=high", "occupyTimeoutMs": 800}`,
			config.Priority{Source: config.Source{Kind: config.SourceHeader, Name: "X-Priority"}, Value: "high"}},
		{`{"prioritized": "true"}`, config.Priority{All: true}},
	} {
		if code, body := put(c.fields); code != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", c.fields, code, body)
		}
		cfg, err := config.Parse(f.path, f.file(t))
		if err != nil {
			t.Fatal(err)
		}
		if r := cfg.Routes[0]; r.Prioritized != c.want || r.OccupyTimeoutMs != 800 {
			t.Errorf("after PUT %s: prioritized %+v, occupyTimeoutMs %d", c.fields, r.Prioritized, r.OccupyTimeoutMs)
		}
	}
}

// TestEditAuthorityRule: the editor lists the file's authorityRules and
// edits one like any rule: a bad address is refused with its file:line and
// the file stays as it was; a valid edit is written.
func TestEditAuthorityRule(t *testing.T) {
	f := newFixture(t, "")
	doc := string(f.file(t)) + "\nauthorityRules:\n  - resource: orders\n    ips: [\"10.0.0.0/8\"]\n"
	if err := os.WriteFile(f.path, []byte(doc), 0o640); err != nil {
		t.Fatal(err)
	}
	code, body, _ := f.do(t, "GET", "/api/rules/raw", nil, "")
	var raw struct{ Sections map[string][]map[string]any }
	if code != 200 || json.Unmarshal([]byte(body), &raw) != nil || len(raw.Sections["authorityRules"]) != 1 || raw.Sections["authorityRules"][0]["resource"] != "orders" {
		t.Fatalf("GET /api/rules/raw: %d %s, want authorityRules[0] of orders", code, body)
	}
	code, body, _ = f.do(t, "PUT", "/api/rules/authorityRules/0",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, `{"ips": ["10.0.0.0/33"]}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, `authorityRules[0].ips[0]: must be a CIDR (10.0.0.0/8) or an IP address, got \"10.0.0.0/33\"`) {
		t.Fatalf("PUT a bad CIDR: %d %s, want 422 naming authorityRules[0].ips[0]", code, body)
	}
	if string(f.file(t)) != doc {
		t.Fatalf("rules.yaml changed by a rejected edit:\n%s", f.file(t))
	}
	code, body, _ = f.do(t, "PUT", "/api/rules/authorityRules/0",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, `{"strategy": "black", "ips": ["2001:db8::/32", "192.168.1.7"]}`)
	if code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	cfg, err := config.Parse(f.path, f.file(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.AuthorityRules[0]; got.Strategy != config.AuthorityBlack || len(got.IPs) != 2 || got.IPs[1] != "192.168.1.7" {
		t.Errorf("authorityRules[0] after the edit: %+v", got)
	}
}

// A body whose fields nest deeper than any rule field is refused with 400
// before anything is built from it: 9,000 nested objects (54 KB) became an
// 81 MB block-style document, built whole (800 MB of heap) before the
// document's size limit refused it. Measured by the bytes this process
// allocates while it answers, in JSON and in YAML.
func TestDeeplyNestedEditIsRefusedCheaply(t *testing.T) {
	f := newFixture(t, "")
	const depth = 9000
	for _, tc := range []struct{ name, contentType, body string }{
		{"json", "application/json", `{"count": 1, "x": ` + strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth) + "}"},
		{"yaml", "application/yaml", "count: 1\nx: " + strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := string(f.file(t))
			code, body, alloc := f.putRule(t, tc.contentType, tc.body)
			if code != http.StatusBadRequest || !strings.Contains(body, "nest more than 16 levels") {
				t.Errorf("PUT of %d nested levels: %d %.200s, want 400 naming the depth", depth, code, body)
			}
			if alloc > 64<<20 {
				t.Errorf("answering it allocated %d MB, want under 64", alloc>>20)
			}
			if string(f.file(t)) != before {
				t.Error("the file changed")
			}
		})
	}
}

// A rules file that went away (deleted, or not yet written back by a
// deploy) is 404 to a read of its text and to an edit, as admin.md's
// table says, not a 500: nothing on the gateway failed.
func TestMissingRulesFileIs404(t *testing.T) {
	f := newFixture(t, "")
	tag := f.etag(t)
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := f.do(t, "GET", "/api/rules/raw", nil, ""); code != http.StatusNotFound || !strings.Contains(body, "does not exist") {
		t.Errorf("GET /api/rules/raw: %d %s, want 404 saying the file does not exist", code, body)
	}
	if code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/0", map[string]string{"If-Match": tag, "Content-Type": "application/json"}, `{"count": 3}`); code != http.StatusNotFound || !strings.Contains(body, "does not exist") {
		t.Errorf("PUT: %d %s, want 404 saying the file does not exist", code, body)
	}
	if _, err := os.Stat(f.path); err == nil {
		t.Error("the edit made a rules file")
	}
}

// An edit of more fields than a rule has is refused with 400 before any is
// looked for: each field was looked for among the rule's, so 75,000 of them
// (a 1 MB body) cost 16 to 22 s of CPU, holding every other edit back.
func TestEditOfManyFieldsIsRefused(t *testing.T) {
	f := newFixture(t, "")
	var js, ym strings.Builder
	js.WriteString(`{"count": 1`)
	ym.WriteString("count: 1\n")
	for i := range 20000 {
		fmt.Fprintf(&js, `, "f%d": 1`, i)
		fmt.Fprintf(&ym, "f%d: 1\n", i)
	}
	js.WriteString("}")
	for _, tc := range []struct{ contentType, body string }{{"application/json", js.String()}, {"application/yaml", ym.String()}} {
		before := string(f.file(t))
		start := time.Now()
		code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/0",
			map[string]string{"If-Match": f.etag(t), "Content-Type": tc.contentType}, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(body, "at most 256 fields") {
			t.Errorf("%s: PUT of 20,001 fields: %d %.200s after %v, want 400 naming the bound", tc.contentType, code, body, time.Since(start))
		}
		if string(f.file(t)) != before {
			t.Error("the file changed")
		}
	}
}
