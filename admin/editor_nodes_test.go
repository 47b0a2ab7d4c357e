package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"sluice/config"
	"sluice/internal/alloctest"
)

// TestWideEditIsRefusedUnexpanded: an edit whose body, within the 1 MiB
// limit, holds more nodes than any rule is refused with 413 before it is
// decoded: "[1,1,...]" in 1 MiB, half a million items, became a block-style
// rule and the node trees of the edited document (657 MB of heap as JSON,
// 756 MB as YAML) before the document was refused. Measured by the bytes
// this process allocates while it answers.
func TestWideEditIsRefusedUnexpanded(t *testing.T) {
	f := newFixture(t, "")
	const n = (1<<20 - 64) / 2
	for _, tc := range []struct{ name, contentType, body string }{
		{"json list", "application/json", `{"count":3,"x":[` + strings.Repeat("1,", n-1) + "1]}"},
		{"yaml flow list", "application/yaml", "count: 3\nx: [" + strings.Repeat("1,", n-1) + "1]\n"},
		{"yaml block list", "application/yaml", "count: 3\nx:\n" + strings.Repeat("- 1\n", n/2)},
		{"json object", "application/json", `{"count":3,"x":{` + manyKeys(n/6) + `}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := string(f.file(t))
			code, body, alloc := f.putRule(t, tc.contentType, tc.body)
			t.Logf("%d-byte body: %d, %d MB allocated", len(tc.body), code, alloc>>20)
			var e struct{ Error string }
			_ = json.Unmarshal([]byte(body), &e)
			want := regexpish(e.Error)
			if code != http.StatusRequestEntityTooLarge || want != "admin: the edit holds over 100,000 YAML nodes (keys, values and list items) by line N of its body, more than any rule; nothing was written" {
				t.Errorf("PUT: %d %.300s, want 413 naming the 100000 nodes", code, body)
			}
			if alloc > 64<<20 {
				t.Errorf("answering it allocated %d MB, want under 64", alloc>>20)
			}
			if string(f.file(t)) != before || f.reloads.Load() != 0 {
				t.Error("the file changed, or a reload was asked")
			}
		})
	}
	// A rule of a thousand param items is an edit like any other.
	var items strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&items, `,{"value":"v%d","count":%d}`, i, i+1)
	}
	doc := string(f.file(t)) + "\nparamRules:\n  - resource: orders\n    param: query:id\n    count: 5\n"
	if err := os.WriteFile(f.path, []byte(doc), 0o640); err != nil {
		t.Fatal(err)
	}
	code, body, _ := f.do(t, "PUT", "/api/rules/paramRules/0",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, `{"items":[`+items.String()[1:]+`]}`)
	if code != http.StatusOK {
		t.Errorf("PUT of 1,000 param items: %d %.500s", code, body)
	}
}

// manyKeys is n JSON members "k0":1,"k1":1,...
func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":1`, i)
	}
	return b.String()
}

// regexpish replaces the line number in the message with N.
func regexpish(msg string) string {
	before, after, ok := strings.Cut(msg, "by line ")
	if !ok {
		return msg
	}
	i := strings.IndexFunc(after, func(r rune) bool { return r < '0' || r > '9' })
	if i <= 0 {
		return msg
	}
	return before + "by line N" + after[i:]
}

// TestEditorLeavesAWideFileUnparsed: a rules file on disk that config
// refuses unparsed (over config.MaxDocumentNodes) is not parsed by the
// editor either: its text is withheld from GET /api/rules/raw, with the
// config error, and an edit of it is 422 with that error.
func TestEditorLeavesAWideFileUnparsed(t *testing.T) {
	f := newFixture(t, "")
	orig := string(f.file(t))
	wide := orig + "\nextra: [" + strings.Repeat("1,", config.MaxDocumentNodes/2) + "1]\n"
	if err := os.WriteFile(f.path, []byte(wide), 0o640); err != nil {
		t.Fatal(err)
	}
	line := strings.Count(orig, "\n") + 2
	want := fmt.Sprintf("%s:%d: extra: the rules document passes the limit of 1,000,000 YAML nodes by this line", f.path, line)

	var code int
	var body string
	alloc := alloctest.Bytes(func() { code, body, _ = f.do(t, "GET", "/api/rules/raw", nil, "") })
	var raw struct {
		Text, ParseError string
		Sections         map[string]any
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &raw) != nil || !strings.HasPrefix(raw.ParseError, want) ||
		strings.Contains(raw.Text, "extra") || raw.Sections != nil {
		t.Errorf("GET /api/rules/raw: %d %.400s, want the text withheld and parseError %q", code, body, want)
	}
	if alloc > 64<<20 {
		t.Errorf("answering it allocated %d MB, want under 64", alloc>>20)
	}

	code, body, _ = f.do(t, "PUT", "/api/rules/flowRules/0",
		map[string]string{"If-Match": "*", "Content-Type": "application/json"}, `{"count": 7}`)
	want = strings.Replace(want, "rules document", "rules file", 1)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "admin: the rules file is too large to edit") || !strings.Contains(body, want) {
		t.Errorf("PUT: %d %.400s, want 422 with %q", code, body, want)
	}
	if string(f.file(t)) != wide {
		t.Error("the file changed")
	}
}
