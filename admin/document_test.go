package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"sluice/admin"
	"sluice/config"
)

const docName = "redis://127.0.0.1:6379/0/sluice:rules"

// gatewayFile is a fleet gateway's own file; the document holds the rest.
const gatewayFile = "listen: \":8080\"\nrulesSource:\n  redis: redis://127.0.0.1:6379/0\n  key: sluice:rules\n"

const fleetDocument = `# the fleet's rules
upstreams:
  orders:
    targets: ["http://127.0.0.1:9001"]
routes:
  - path: /orders/*
    upstream: orders
    resource: orders
flowRules:
  - resource: orders
    count: 100 # for the sale
  - resource: orders
    limitApp: mobile
    count: 20
`

// memDoc is a Document with Redis's compare-and-set semantics, in memory.
type memDoc struct {
	mu      sync.Mutex
	version int64
	text    []byte
	down    bool
	// beforePush runs inside Push before the compare: another writer
	// storing a version between the editor's read and its write.
	beforePush func()
}

func (d *memDoc) Name() string { return docName }

func (d *memDoc) Pull(context.Context) (int64, []byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return 0, nil, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	return d.version, append([]byte(nil), d.text...), nil
}

func (d *memDoc) Push(_ context.Context, text []byte, basedOn int64) (int64, error) {
	if f := d.beforePush; f != nil {
		d.beforePush = nil
		f()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if basedOn != d.version {
		return 0, fmt.Errorf("stored version %d: %w", d.version, admin.ErrConflict)
	}
	d.version++
	d.text = append([]byte(nil), text...)
	return d.version, nil
}

// store is another writer (sluice rules push) storing the next version.
func (d *memDoc) store(text string) {
	d.mu.Lock()
	d.version++
	d.text = []byte(text)
	d.mu.Unlock()
}

func (d *memDoc) Validate(text []byte) error {
	_, err := config.ParseWithDocument("rules.yaml", []byte(gatewayFile), docName, text)
	return err
}

func (d *memDoc) get() (int64, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.version, string(d.text)
}

type docFixture struct {
	fixture
	doc *memDoc
}

func newDocFixture(t *testing.T) *docFixture {
	f := &docFixture{doc: &memDoc{version: 1, text: []byte(fleetDocument)}}
	f.srv = admin.New(admin.Options{
		ConfigPath: "rules.yaml",
		Document:   f.doc,
		Reload:     func() { f.reloads.Add(1) },
		State:      func() admin.State { return admin.State{Ready: true} },
	})
	f.ts = httptest.NewServer(f.srv.Handler())
	t.Cleanup(f.ts.Close)
	return f
}

func TestDocumentEditorReadsTheDocument(t *testing.T) {
	f := newDocFixture(t)
	code, body, etag := f.do(t, "GET", "/api/rules/raw", nil, "")
	var raw struct {
		Path, ETag, Text string
		Version          int64
		Sections         map[string][]map[string]any
	}
	if err := json.Unmarshal([]byte(body), &raw); err != nil || code != 200 {
		t.Fatalf("GET /api/rules/raw: %d %s", code, body)
	}
	if etag != `"v1"` || raw.ETag != etag || raw.Version != 1 || raw.Path != docName || raw.Text != fleetDocument ||
		len(raw.Sections["flowRules"]) != 2 {
		t.Fatalf("raw = %+v, ETag header %s", raw, etag)
	}
}

func TestDocumentEditStoresTheNextVersion(t *testing.T) {
	f := newDocFixture(t)
	code, body, etag := f.do(t, "PUT", "/api/rules/flowRules/1",
		map[string]string{"If-Match": `"v1"`, "Content-Type": "application/json"}, `{"count": 35}`)
	if code != 200 || etag != `"v2"` {
		t.Fatalf("PUT: %d %s (ETag %s), want 200 and ETag \"v2\"", code, body, etag)
	}
	v, text := f.doc.get()
	want := strings.Replace(fleetDocument, "limitApp: mobile\n    count: 20\n", "limitApp: mobile\n    count: 35\n", 1)
	if v != 2 || text != want {
		t.Fatalf("stored version %d:\n%s\nwant version 2:\n%s", v, text, want)
	}
	if n := f.reloads.Load(); n != 0 {
		t.Errorf("Reload called %d times: the gateways take the version from the source", n)
	}
}

// A stale write is refused with 409 and the current ETag, whether the other
// writer came before the editor read (If-Match names an old version) or
// between its read and its write (the compare-and-set refuses it); the
// other writer's version is kept either way.
func TestDocumentStaleEditGets409(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(d *memDoc)
	}{
		{"another version stored before", func(d *memDoc) { d.store(fleetDocument + "# pushed by the CLI\n") }},
		{"another version stored during the edit", func(d *memDoc) {
			d.beforePush = func() { d.store(fleetDocument + "# pushed by the CLI\n") }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDocFixture(t)
			tc.setup(f.doc)
			code, body, etag := f.do(t, "PUT", "/api/rules/flowRules/0",
				map[string]string{"If-Match": `"v1"`, "Content-Type": "application/json"}, `{"count": 7}`)
			if code != http.StatusConflict || etag != `"v2"` {
				t.Fatalf("PUT based on v1: %d %s (ETag %s), want 409 and ETag \"v2\"", code, body, etag)
			}
			if v, text := f.doc.get(); v != 2 || !strings.HasSuffix(text, "# pushed by the CLI\n") {
				t.Fatalf("stored version %d:\n%s\nwant the other writer's version 2 kept", v, text)
			}
		})
	}
}

func TestDocumentInvalidEditStoresNothing(t *testing.T) {
	f := newDocFixture(t)
	code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/0",
		map[string]string{"If-Match": `"v1"`, "Content-Type": "application/json"}, `{"count": -5}`)
	var out struct{ Lines []string }
	_ = json.Unmarshal([]byte(body), &out)
	if code != http.StatusUnprocessableEntity || len(out.Lines) != 1 || out.Lines[0] != docName+":11: flowRules[0].count: must be > 0, got -5" {
		t.Fatalf("PUT count -5: %d %s; want 422 naming %s:11", code, body, docName)
	}
	if v, text := f.doc.get(); v != 1 || text != fleetDocument {
		t.Fatalf("version %d stored after an invalid edit", v)
	}
}

func TestDocumentUnreachableIs503(t *testing.T) {
	f := newDocFixture(t)
	f.doc.down = true
	if code, body, _ := f.do(t, "GET", "/api/rules/raw", nil, ""); code != http.StatusServiceUnavailable {
		t.Errorf("GET raw with Redis down: %d %s", code, body)
	}
	if code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/0",
		map[string]string{"If-Match": `"v1"`, "Content-Type": "application/json"}, `{"count": 7}`); code != http.StatusServiceUnavailable {
		t.Errorf("PUT with Redis down: %d %s", code, body)
	}
}

func TestFleetAPI(t *testing.T) {
	seen := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var fail error
	src := &admin.SourceState{Name: docName, Version: 4, Up: true, LastSeen: &seen}
	srv := admin.New(admin.Options{
		State: func() admin.State { return admin.State{Ready: true, Source: src} },
		Fleet: func(context.Context) ([]admin.FleetGateway, error) {
			return []admin.FleetGateway{
				{ID: "a", Listen: "127.0.0.1:8081", Version: 4, PassQps: 10, BlockQps: 1, LastSeen: seen},
				{ID: "b", Listen: "127.0.0.1:8082", Version: 3, PassQps: 5.5, BlockQps: 0, LastSeen: seen},
			}, fail
		},
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/api/fleet")
	var out struct {
		Gateways []admin.FleetGateway
		Totals   struct {
			Gateways          int
			PassQps, BlockQps float64
		}
		Source admin.SourceState
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || code != 200 {
		t.Fatalf("GET /api/fleet: %d %s", code, body)
	}
	if len(out.Gateways) != 2 || out.Gateways[1].Listen != "127.0.0.1:8082" || out.Totals.Gateways != 2 ||
		out.Totals.PassQps != 15.5 || out.Totals.BlockQps != 1 || out.Source.Version != 4 {
		t.Fatalf("fleet = %+v", out)
	}
	for _, k := range []string{`"id"`, `"listen"`, `"version"`, `"passQps"`, `"blockQps"`, `"lastSeen":"2026-12-01T10:00:00Z"`} {
		if !strings.Contains(body, k) {
			t.Errorf("body lacks %s: %s", k, body)
		}
	}
	fail = errors.New("redis down")
	if code, _ := get("/api/fleet"); code != http.StatusServiceUnavailable {
		t.Errorf("GET /api/fleet with Redis down: %d, want 503", code)
	}

	// Readiness says when the rules in force came from the cache.
	if code, body := get("/readyz"); code != 200 || body != "ready" {
		t.Errorf("/readyz = %d %q", code, body)
	}
	src.FromCache, src.Cache, src.Up = true, "/etc/sluice/rules.last-good.yaml", false
	if code, body := get("/readyz"); code != 200 || body != "ready: serving the last good rules from /etc/sluice/rules.last-good.yaml (version 4), not the rules source "+docName {
		t.Errorf("/readyz from the cache = %d %q", code, body)
	}

	// Without a rules source there is no fleet.
	plain := httptest.NewServer(admin.New(admin.Options{}).Handler())
	defer plain.Close()
	if resp, err := http.Get(plain.URL + "/api/fleet"); err != nil || resp.StatusCode != 404 {
		t.Errorf("GET /api/fleet without a source: %v %v", resp.StatusCode, err)
	}
}

func TestSourceMetrics(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 30, 0, time.UTC)
	seen := now.Add(-12 * time.Second)
	src := &admin.SourceState{Name: docName, Version: 9, Up: false, LastSeen: &seen, FromCache: true}
	reg := prometheus.NewRegistry()
	if err := admin.RegisterSourceMetrics(reg, func() admin.State { return admin.State{Source: src} }, func() time.Time { return now }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP sluice_rules_from_cache 1 while the rules in force came from the last good file: the gateway started without a valid document from the source, and none has applied since.
# TYPE sluice_rules_from_cache gauge
sluice_rules_from_cache 1
# HELP sluice_rules_source_last_seen_seconds Seconds since the Redis of the rules source last answered (+Inf: never).
# TYPE sluice_rules_source_last_seen_seconds gauge
sluice_rules_source_last_seen_seconds 12
# HELP sluice_rules_source_up 1 when the Redis of the rules source answered the last call, else 0.
# TYPE sluice_rules_source_up gauge
sluice_rules_source_up 0
# HELP sluice_rules_version Version of the fleet's rules document in force (0: none yet).
# TYPE sluice_rules_version gauge
sluice_rules_version 9
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	src.LastSeen = nil
	if err := testutil.GatherAndCompare(reg, strings.NewReader("# HELP sluice_rules_source_last_seen_seconds Seconds since the Redis of the rules source last answered (+Inf: never).\n# TYPE sluice_rules_source_last_seen_seconds gauge\nsluice_rules_source_last_seen_seconds +Inf\n"),
		"sluice_rules_source_last_seen_seconds"); err != nil {
		t.Fatal(err)
	}
}
