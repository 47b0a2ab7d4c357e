package config_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"sluice/config"
	"sluice/internal/alloctest"
)

// fill is head followed by item repeated to make a document just under
// MaxDocumentBytes, then tail.
func fill(head, item, tail string) string {
	n := (config.MaxDocumentBytes - len(head) - len(tail)) / len(item)
	return head + strings.Repeat(item, n) + tail
}

// numbered is head then lines of format with 0, 1, 2, ... until the
// document is just under MaxDocumentBytes.
func numbered(head, format string) string {
	var b strings.Builder
	b.WriteString(head)
	for i := 0; ; i++ {
		l := fmt.Sprintf(format, i)
		if b.Len()+len(l) > config.MaxDocumentBytes {
			return b.String()
		}
		b.WriteString(l)
	}
}

// TestWideDocumentIsRefusedUnparsed: a document within MaxDocumentBytes but
// of millions of nodes is refused before yaml.v3 builds its tree, at the
// line where it passed MaxDocumentNodes and in the section of that line,
// as a file, a rules document and an edit's result alike. yaml.v3 built
// every node first: 8 MiB of "1," (4 million nodes) took 1,032 MB of heap to
// refuse as an unknown field, 700,000 unknown keys 696 MB. Measured by the
// bytes this process allocates while Parse runs.
func TestWideDocumentIsRefusedUnparsed(t *testing.T) {
	const head = "routes:\n  - path: /a\n    upstream: u\n"
	const msg = "the file passes the limit of 1,000,000 YAML nodes by this line (keys, values and list items, counted before parsing), so it was not parsed; 10,000 routes with their rules hold about 330,000"
	for _, tc := range []struct {
		name, doc string
		line      int    // 0: any line past the head's
		field     string // "": the key of the line
	}{
		{"wide flow list", fill(head+"extra: [", "1,", "1]\n"), 4, "extra"},
		{"wide flow list in a route", fill(head+"  - path: /b\n    upstream: u\n    methods: [", "1,", "1]\n"), 6, "routes"},
		{"wide block list", fill(head+"extra:\n", "  - 1\n", ""), 0, "extra"},
		{"wide flow mapping", fill(head+"extra: {", "a,", "a}\n"), 4, "extra"},
		{"many unknown keys", numbered(head, "k%07d: 1\n"), 0, ""},
		{"many routes of unknown fields", numbered(head, "  - x%07d: 1\n"), 0, "routes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.doc)
			var err error
			alloc := alloctest.Bytes(func() { _, err = config.Parse("rules.yaml", data) })
			t.Logf("%d bytes: refused with %d KB allocated", len(data), alloc>>10)
			var es config.Errors
			if !errors.As(err, &es) || len(es) != 1 {
				t.Fatalf("Parse: %.300v, want one error", err)
			}
			e := es[0]
			wantField := tc.field
			if wantField == "" {
				lines := strings.Split(tc.doc, "\n")
				wantField, _, _ = strings.Cut(lines[max(e.Line-1, 0)], ":")
			}
			if e.File != "rules.yaml" || e.Line <= 3 || tc.line != 0 && e.Line != tc.line || e.Field != wantField || e.Msg != msg {
				t.Errorf("Parse: %v, want rules.yaml:%d: %s: %s", e, tc.line, wantField, msg)
			}
			if alloc > 16<<20 {
				t.Errorf("refusing it allocated %d MB, want under 16", alloc>>20)
			}
		})
	}
}

// TestAuditWideDocumentMemoryIsBounded is the audit's test as it was
// found failing (1,032 MB).
func TestAuditWideDocumentMemoryIsBounded(t *testing.T) {
	head := "routes:\n  - path: /a\n    upstream: u\nextra: ["
	n := (config.MaxDocumentBytes - len(head) - 2) / 2
	doc := head + strings.Repeat("1,", n-1) + "1]\n"
	data := []byte(doc)
	var err error
	got := alloctest.Bytes(func() { _, err = config.Parse("rules.yaml", data) })
	t.Logf("refusing a %d-byte document allocated %d KB: %v", len(doc), got>>10, err)
	if got > 256<<20 {
		t.Fatalf("refusing an %d-byte document allocated %d MB", len(doc), got>>20)
	}
}

// TestManyUnknownKeysUnderTheNodeLimit: a document under the node limit
// that is all unknown keys is refused at the cost of its tree, not of a
// "did you mean" for every key: past the errors kept, none is shown, and
// 300,000 unknown keys allocated 1,086 MB for them (256 MB without).
func TestManyUnknownKeysUnderTheNodeLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("routes:\n  - path: /a\n    upstream: u\n")
	for i := range 300_000 {
		b.WriteString("k" + strconv.Itoa(i) + ": 1\n")
	}
	doc := []byte(b.String())
	var err error
	got := alloctest.Bytes(func() { _, err = config.Parse("rules.yaml", doc) })
	if err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("300,000 unknown keys: %v, want unknown fields", err)
	}
	if got > 512<<20 {
		t.Errorf("refusing 300,000 unknown keys allocated %d MB", got>>20)
	}
}

// TestWideRulesDocumentIsRefusedUnparsed: a fleet's rules document is
// counted as a file is, and named in the error.
func TestWideRulesDocumentIsRefusedUnparsed(t *testing.T) {
	gateway := "rulesSource:\n  redis: redis://127.0.0.1:1/0\n  key: sluice:rules\ncluster:\n  redis: redis://127.0.0.1:1/0\n"
	doc := fill("routes:\n  - path: /a\n    upstream: u\nextra: [", "1,", "1]\n")
	_, err := config.ParseWithDocument("gateway.yaml", []byte(gateway), "redis://h/0/sluice:rules", []byte(doc))
	var es config.Errors
	if !errors.As(err, &es) || len(es) != 1 || es[0].File != "redis://h/0/sluice:rules" || es[0].Line != 4 || es[0].Field != "extra" ||
		!strings.HasPrefix(es[0].Msg, "the rules document passes the limit of 1,000,000 YAML nodes by this line") {
		t.Fatalf("ParseWithDocument: %.300v, want the document's line 4 over 1000000 nodes", err)
	}
}

// richRoutes is a rules document of n routes, each with methods, hosts, a
// flow rule, a param rule of three items and a degrade rule: 64 nodes a
// route, which count 102.
func richRoutes(n int) []byte {
	var b strings.Builder
	b.WriteString("upstreams:\n  app:\n    targets: [\"http://127.0.0.1:9001\", \"http://127.0.0.1:9002\"]\nroutes:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - path: /r%d/items/{id}   # route %d\n    methods: [GET, POST, PUT]\n    hosts: [a%d.example.com, b%d.example.com]\n    upstream: app\n    resource: res-%d\n    acquireCount: 1\n", i, i, i, i, i)
	}
	b.WriteString("flowRules:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - resource: res-%d\n    count: %d\n    controlBehavior: throttle\n    maxQueueingTimeMs: 500\n", i, 10+i%100)
	}
	b.WriteString("paramRules:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - resource: res-%d\n    param: path:id\n    count: 5\n    items:\n      - { value: \"1\", count: 4 }\n      - { value: \"2\", count: 8 }\n      - { value: \"3\", count: 16 }\n", i)
	}
	b.WriteString("degradeRules:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - resource: res-%d\n    strategy: slowRatio\n    maxAllowedRtMs: 200\n    threshold: 0.5\n    minRequestAmount: 5\n    retryTimeoutMs: 5000\n", i)
	}
	return []byte(b.String())
}

// TestLargeRealFileIsUnderTheNodeLimit: 5,000 routes, each with its rules
// and more fields than most, load; the 10,000 routes with a flow and a
// param rule that a gateway is sized for (manyRoutes) count a third of
// the limit.
func TestLargeRealFileIsUnderTheNodeLimit(t *testing.T) {
	data := richRoutes(5_000)
	cfg, err := config.Parse("rules.yaml", data)
	if err != nil {
		t.Fatalf("%.500v", err)
	}
	if len(cfg.Routes) != 5_000 || len(cfg.ParamRules) != 5_000 || len(cfg.DegradeRules) != 5_000 {
		t.Fatalf("loaded %d routes, %d param rules, %d degrade rules; want 5,000 each", len(cfg.Routes), len(cfg.ParamRules), len(cfg.DegradeRules))
	}
	for _, limit := range []int{config.MaxDocumentNodes / 3, config.MaxDocumentNodes * 2 / 3} {
		doc := manyRoutes(10_000)
		if limit > config.MaxDocumentNodes/2 {
			doc = data
		}
		if over, line := config.CountNodes(doc, limit); over {
			t.Errorf("a %d-byte document counts over %d nodes by line %d", len(doc), limit, line)
		}
	}
}
