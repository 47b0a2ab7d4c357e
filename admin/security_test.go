package admin_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"sluice/admin"
	"sluice/config"
)

func TestRawRulesMaskSecrets(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	file := "admin:\n  listen: 127.0.0.1:9090\n  token: hunter2 # rotate monthly\ncluster:\n  redis: \"redis://:p4ss@redis:6379/0\"\nflowRules:\n  - resource: a\n    count: 1\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := admin.New(admin.Options{ConfigPath: path})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090/api/rules/raw", nil))
	var raw struct {
		Text     string
		ETag     string
		Sections map[string][]map[string]any
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil || rec.Code != 200 {
		t.Fatalf("GET /api/rules/raw: %d %v", rec.Code, err)
	}
	if strings.Contains(raw.Text, "hunter2") || strings.Contains(raw.Text, "p4ss") {
		t.Fatalf("secret served on an open endpoint:\n%s", raw.Text)
	}
	want := "admin:\n  listen: 127.0.0.1:9090\n  token: \"xxxxx\" # rotate monthly\ncluster:\n  redis: \"redis://:xxxxx@redis:6379/0\"\nflowRules:\n  - resource: a\n    count: 1\n"
	if raw.Text != want {
		t.Errorf("masked text:\n%s\nwant:\n%s", raw.Text, want)
	}
	if raw.Sections["flowRules"][0]["count"] != 1.0 {
		t.Errorf("sections = %v", raw.Sections)
	}
	if rec.Header().Get("ETag") != raw.ETag || raw.ETag == "" {
		t.Errorf("ETag header %q, body %q", rec.Header().Get("ETag"), raw.ETag)
	}
	// A password in a URL's query, or before the "@" of a Sentinel
	// address, both of which config refuses, is masked too.
	for _, tc := range []struct{ file, secret, want string }{
		{"cluster:\n  redis: redis://127.0.0.1:6379/0?password=QueryPw1\n", "QueryPw1", "redis://127.0.0.1:6379/0?password=xxxxx"},
		{"cluster:\n  sentinel:\n    addrs: [\"u:SentPw2@127.0.0.1:26379\"]\n", "SentPw2", "u:xxxxx@127.0.0.1:26379"},
	} {
		if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090/api/rules/raw", nil))
		if strings.Contains(rec.Body.String(), tc.secret) || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("raw text of %q: %s; want %s and not the password", tc.file, rec.Body, tc.want)
		}
	}
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	// The ETag is served beside the masked text: a plain hash of the file
	// would let a reader test guesses of the token offline (put each in
	// place of xxxxx, hash, compare). It is keyed by the process, and
	// stable within it.
	sum := sha256.Sum256([]byte(file))
	if raw.ETag == `"`+hex.EncodeToString(sum[:16])+`"` {
		t.Error("the ETag is the file's plain SHA-256: a guess of the secret can be checked against it offline")
	}
	again := httptest.NewRecorder()
	srv.Handler().ServeHTTP(again, httptest.NewRequest("GET", "http://127.0.0.1:9090/api/rules/raw", nil))
	other := httptest.NewRecorder()
	admin.New(admin.Options{ConfigPath: path}).Handler().ServeHTTP(other, httptest.NewRequest("GET", "http://127.0.0.1:9090/api/rules/raw", nil))
	if again.Header().Get("ETag") != raw.ETag || other.Header().Get("ETag") == raw.ETag {
		t.Errorf("ETags: %s, then %s; another process's %s: want the same within a process, another across", raw.ETag, again.Header().Get("ETag"), other.Header().Get("ETag"))
	}
}

// Peers a test request comes from (RemoteAddr, the TCP peer).
const (
	loopback = "127.0.0.1:40000"
	network  = "192.0.2.7:40000" // another machine
)

// TestAdminGuards: reads answer only Hosts that are IP literals, localhost
// or in admin.hosts (DNS rebinding), whoever the peer; writes and the
// profiler need the token, or without one a loopback TCP peer, whatever
// the Host or X-Forwarded-For say.
func TestAdminGuards(t *testing.T) {
	var reloads atomic.Int32
	srv := admin.New(admin.Options{ConfigPath: "testdata/rules.yaml", Hosts: []string{"gw.internal", "*.admin.example.com"},
		Reload: func() { reloads.Add(1) }})
	tests := []struct {
		token, method, path, peer, host string
		hdr                             []string // "Name: value"
		want                            int
	}{
		// Writes without a token: the TCP peer decides.
		{"", "POST", "/api/reload", loopback, "127.0.0.1:9090", nil, 202},
		{"", "POST", "/api/reload", loopback, "localhost:9090", nil, 202},
		{"", "POST", "/api/reload", "127.3.2.1:40000", "localhost:9090", nil, 202},
		{"", "POST", "/api/reload", "[::1]:40000", "[::1]:9090", nil, 202},
		{"", "POST", "/api/reload", "[::ffff:127.0.0.1]:40000", "127.0.0.1:9090", nil, 202},
		{"", "POST", "/api/reload", network, "localhost:9090", nil, 403}, // the Host is the client's word
		{"", "POST", "/api/reload", network, "127.0.0.1:9090", []string{"X-Forwarded-For: 127.0.0.1", "X-Real-Ip: 127.0.0.1"}, 403},
		{"", "POST", "/api/reload", "[::ffff:192.0.2.7]:40000", "localhost", nil, 403},
		{"", "POST", "/api/reload", network, "gw.internal:9090", nil, 403},
		{"", "POST", "/api/reload", loopback, "attacker.example:9090", nil, 403}, // DNS rebinding onto 127.0.0.1
		// With a token, the token decides, from any peer.
		{"t", "POST", "/api/reload", network, "localhost:9090", nil, 401},
		{"t", "POST", "/api/reload", loopback, "localhost:9090", nil, 401},
		{"t", "POST", "/api/reload", network, "localhost:9090", []string{"Authorization: Bearer t"}, 202},
		{"t", "POST", "/api/reload", network, "gw.internal:9090", []string{"Authorization: Bearer t"}, 202},
		{"t", "POST", "/api/reload", network, "attacker.example:9090", []string{"Authorization: Bearer t"}, 403},
		// Reads: the Host decides, from any peer.
		{"", "GET", "/api/rules/raw", loopback, "evil.example", nil, 403},
		{"", "GET", "/metrics", loopback, "evil.example:9090", nil, 403},
		{"", "GET", "/", loopback, "evil.example:9090", nil, 403},
		{"", "GET", "/healthz", loopback, "evil.example:9090", nil, 403},
		{"", "GET", "/api/rules/raw", loopback, "localhost.evil.example", nil, 403},
		{"", "GET", "/api/rules/raw", loopback, "127.0.0.1.nip.io", nil, 403},
		{"", "GET", "/api/rules/raw", loopback, "admin.example.com", nil, 403}, // *.admin.example.com: a name under it
		{"", "GET", "/api/rules/raw", loopback, "x.gw.internal", nil, 403},
		{"", "GET", "/api/rules/raw", loopback, "127.0.0.1:9090", nil, 200},
		{"", "GET", "/metrics", loopback, "localhost:9090", nil, 200},
		{"", "GET", "/metrics", loopback, "LocalHost.:9090", nil, 200},
		{"", "GET", "/metrics", network, "[::1]:9090", nil, 200},
		{"", "GET", "/healthz", network, "10.1.2.3:9090", nil, 200}, // a Kubernetes probe: Host is the pod IP
		{"", "GET", "/api/rules/raw", network, "gw.internal:9090", nil, 200},
		{"", "GET", "/metrics", network, "GW.Internal.", nil, 200},
		{"", "GET", "/metrics", network, "a.b.admin.example.com:9090", nil, 200},
		{"", "GET", "/readyz", network, "", nil, 403}, // HTTP/1.0 without Host: no accepted Host either (SPEC §9)
		// The profiler: like a write.
		{"", "GET", "/debug/pprof/heap", loopback, "127.0.0.1:9090", nil, 200},
		{"", "GET", "/debug/pprof/", loopback, "localhost:9090", nil, 200},
		{"", "GET", "/debug/pprof/cmdline", "[::1]:40000", "[::1]:9090", nil, 200},
		{"", "GET", "/debug/pprof/heap", network, "localhost:9090", nil, 403},
		{"", "GET", "/debug/pprof/goroutine", network, "192.0.2.1:9090", nil, 403},
		{"", "GET", "/debug/pprof/heap", loopback, "evil.example", nil, 403},
		{"t", "GET", "/debug/pprof/heap", network, "192.0.2.1:9090", []string{"Authorization: Bearer t"}, 200},
		{"t", "GET", "/debug/pprof/heap", network, "192.0.2.1:9090", nil, 403},
		{"t", "GET", "/debug/pprof/heap", loopback, "127.0.0.1:9090", nil, 403},
		// Another site's page in the operator's browser: an <img> sends no
		// Origin, but Sec-Fetch-Site says where it came from. The
		// dashboard's own requests are same-origin; scripts send none.
		{"", "GET", "/debug/pprof/heap", loopback, "127.0.0.1:9090", []string{"Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: no-cors"}, 403},
		{"", "GET", "/debug/pprof/profile?seconds=1", loopback, "127.0.0.1:9090", []string{"Sec-Fetch-Site: same-site"}, 403},
		{"", "POST", "/api/reload", loopback, "127.0.0.1:9090", []string{"Sec-Fetch-Site: cross-site"}, 403},
		{"t", "POST", "/api/reload", network, "localhost:9090", []string{"Authorization: Bearer t", "Sec-Fetch-Site: cross-site"}, 403},
		{"", "POST", "/api/reload", loopback, "127.0.0.1:9090", []string{"Sec-Fetch-Site: same-origin"}, 202},
		{"", "GET", "/debug/pprof/heap", loopback, "127.0.0.1:9090", []string{"Sec-Fetch-Site: none"}, 200}, // typed in the address bar
		// A browser without Sec-Fetch-Site names the page in Referer.
		{"", "GET", "/debug/pprof/profile?seconds=1", loopback, "127.0.0.1:9090", []string{"Referer: http://evil.example/x.html"}, 403},
		{"", "POST", "/api/reload", loopback, "127.0.0.1:9090", []string{"Referer: http://127.0.0.1.evil.example/"}, 403},
		{"", "POST", "/api/reload", loopback, "localhost:9090", []string{"Referer: http://127.0.0.1:9090/"}, 403}, // another origin
		{"", "POST", "/api/reload", loopback, "127.0.0.1:9090", []string{"Referer: http://127.0.0.1:9090/#editor"}, 202},
	}
	want202 := int32(0)
	for _, tc := range tests {
		srv.SetToken(tc.token)
		req := httptest.NewRequest(tc.method, tc.path, nil)
		req.RemoteAddr, req.Host = tc.peer, tc.host
		for _, h := range tc.hdr {
			k, v, _ := strings.Cut(h, ": ")
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("token %q: %s %s from %s, Host %q, %q: %d, want %d: %s", tc.token, tc.method, tc.path, tc.peer, tc.host, tc.hdr,
				rec.Code, tc.want, rec.Body)
		}
		if tc.want == 202 {
			want202++
		}
	}
	if got := reloads.Load(); got != want202 {
		t.Errorf("Reload called %d times, want %d", got, want202)
	}
}

// TestSetHostsApplies: admin.hosts from a reload is in force from the next
// request on.
func TestSetHostsApplies(t *testing.T) {
	srv := admin.New(admin.Options{Hosts: []string{"old.internal"}})
	get := func(host string) int {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	if a, b := get("old.internal:9090"), get("new.internal:9090"); a != 200 || b != 403 {
		t.Fatalf("before SetHosts: old %d, new %d; want 200, 403", a, b)
	}
	srv.SetHosts([]string{"new.internal"})
	if a, b := get("old.internal:9090"), get("new.internal:9090"); a != 403 || b != 200 {
		t.Fatalf("after SetHosts: old %d, new %d; want 403, 200", a, b)
	}
}

func TestConcurrentEditsBasedOnOneVersion(t *testing.T) {
	f := newFixture(t, "")
	etag := f.etag(t)
	const n = 8
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			code, _, _ := f.do(t, "PUT", "/api/rules/flowRules/0",
				map[string]string{"If-Match": etag, "Content-Type": "application/json"}, `{"count": `+string(rune('1'+i))+`}`)
			codes <- code
		}(i)
	}
	wg.Wait()
	close(codes)
	got := map[int]int{}
	for c := range codes {
		got[c]++
	}
	if got[http.StatusOK] != 1 || got[http.StatusConflict] != n-1 {
		t.Fatalf("status counts %v: want exactly one 200 and %d 409s (no lost update)", got, n-1)
	}
}

func TestEditThroughSymlinkReplacesTarget(t *testing.T) {
	f := newFixture(t, "")
	// Kubernetes mounts a ConfigMap as a symlink to a versioned file.
	dir := filepath.Dir(f.path)
	target := filepath.Join(dir, "v1-rules.yaml")
	if err := os.Rename(f.path, target); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("v1-rules.yaml", f.path); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/0",
		map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}, `{"count": 9}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if fi, err := os.Lstat(f.path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("rules.yaml is no longer a symlink: %v %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(target); !strings.Contains(string(b), "count: 9 # raised for the sale") {
		t.Fatalf("target not edited:\n%s", b)
	}
}

// TestSetTokenRotates: after SetToken the new token is needed for writes and
// the old one is refused; /api/rules says whether a token is required.
func TestSetTokenRotates(t *testing.T) {
	srv := admin.New(admin.Options{Token: "old"})
	write := func(token, peer string) int {
		req := httptest.NewRequest("POST", "http://127.0.0.1:9090/api/reload", nil)
		req.RemoteAddr = peer
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	required := func() bool {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090/api/rules", nil))
		return strings.Contains(rec.Body.String(), `"tokenRequired":true`)
	}
	steps := []struct {
		set      string // "-": keep
		token    string
		peer     string
		want     int
		required bool
	}{
		{"-", "old", network, 202, true},
		{"new", "old", network, 401, true},
		{"-", "new", network, 202, true},
		{"-", "", network, 401, true},
		// No token: writes only from a loopback peer, with any Authorization.
		{"", "new", network, 403, false},
		{"-", "", loopback, 202, false},
	}
	for i, s := range steps {
		if s.set != "-" {
			srv.SetToken(s.set)
		}
		if got := write(s.token, s.peer); got != s.want {
			t.Errorf("step %d: write with token %q from %s: %d, want %d", i, s.token, s.peer, got, s.want)
		}
		if got := required(); got != s.required {
			t.Errorf("step %d: tokenRequired %v, want %v", i, got, s.required)
		}
	}
}

// TestRawRulesMaskRedisPasswords: every form that names the Redis can carry
// a password (sentinel's two, every clusterAddrs URL, several on one line);
// none is served.
func TestRawRulesMaskRedisPasswords(t *testing.T) {
	tests := []struct{ file, want string }{
		{"cluster:\n  sentinel:\n    masterName: m\n    addrs: [\"10.0.0.1:26379\"]\n    password: hunter2\n    sentinelPassword: 'hunter3' # sentinels' own\n",
			"cluster:\n  sentinel:\n    masterName: m\n    addrs: [\"10.0.0.1:26379\"]\n    password: \"xxxxx\"\n    sentinelPassword: \"xxxxx\" # sentinels' own\n"},
		{"cluster:\n  clusterAddrs: [\"redis://u:hunter2@10.0.0.1:7000\", redis://u:hunter2@10.0.0.2:7000]\n",
			"cluster:\n  clusterAddrs: [\"redis://u:xxxxx@10.0.0.1:7000\", \"redis://u:xxxxx@10.0.0.2:7000\"]\n"},
		{"cluster:\n  clusterAddrs:\n    - rediss://u:hunter2@10.0.0.1:7000\n    - 10.0.0.2:7000\n",
			"cluster:\n  clusterAddrs:\n    - \"rediss://u:xxxxx@10.0.0.1:7000\"\n    - 10.0.0.2:7000\n"},
		// A rules source's Redis too: a gateway that serves this file (it
		// started before rulesSource was added) shows it until its restart.
		{"rulesSource:\n  redis: redis://:hunter2@10.0.0.1:6379/0\n  key: sluice:rules\n",
			"rulesSource:\n  redis: \"redis://:xxxxx@10.0.0.1:6379/0\"\n  key: sluice:rules\n"},
		{"rulesSource:\n  sentinel: {masterName: m, addrs: [\"10.0.0.1:26379\"], password: hunter2, sentinelPassword: hunter3}\n  key: k\n",
			"rulesSource:\n  sentinel: {masterName: m, addrs: [\"10.0.0.1:26379\"], password: \"xxxxx\", sentinelPassword: \"xxxxx\"}\n  key: k\n"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
			t.Fatal(err)
		}
		srv := admin.New(admin.Options{ConfigPath: path})
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090/api/rules/raw", nil))
		var raw struct{ Text string }
		if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil || rec.Code != 200 {
			t.Fatalf("GET /api/rules/raw: %d %v %s", rec.Code, err, rec.Body)
		}
		if raw.Text != tt.want {
			t.Errorf("masked text:\n%s\nwant:\n%s", raw.Text, tt.want)
		}
	}
}

// TestRawRulesMaskEverySecret: every secret config.Secrets lists, set in
// the rules file, is served masked by GET /api/rules/raw, with config.Mask.
func TestRawRulesMaskEverySecret(t *testing.T) {
	for _, s := range config.Secrets() {
		t.Run(s.Path, func(t *testing.T) {
			value := "hunter2"
			if s.URL {
				value = "redis://u:hunter2@10.0.0.1:6379/0"
			}
			path := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(path, []byte(s.Document(value)), 0o600); err != nil {
				t.Fatal(err)
			}
			srv := admin.New(admin.Options{ConfigPath: path})
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090/api/rules/raw", nil))
			var raw struct{ Text string }
			if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil || rec.Code != 200 {
				t.Fatalf("GET /api/rules/raw: %d %v %s", rec.Code, err, rec.Body)
			}
			if strings.Contains(raw.Text, "hunter2") || !strings.Contains(raw.Text, config.Mask) {
				t.Errorf("served:\n%s", raw.Text)
			}
		})
	}
}

// TestDashboardNotFramable: the dashboard is served at / only, with
// X-Frame-Options: DENY and a CSP (docs/admin.md), so no other site can
// frame it and have the operator click Lift or Save; /static/ serves its
// assets, never the page itself (which http.FileServer would serve for
// /static/ without those headers), and no frame of its own either.
func TestDashboardNotFramable(t *testing.T) {
	srv := admin.New(admin.Options{})
	for _, tt := range []struct {
		path string
		want int
	}{
		{"/", 200},
		{"/static/", 404},
		{"/static/index.html", 404},
		{"/static/app.js", 200},
		{"/static/style.css", 200},
		{"/static/../web/index.html", 404},
		{"/static/nothing.js", 404},
		{"/metrics", 200},
		{"/api/rules", 200},
		{"/api/nothing", 404},
	} {
		req := httptest.NewRequest("GET", "http://127.0.0.1:9090"+tt.path, nil)
		req.RemoteAddr = loopback
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("GET %s: %d, want %d", tt.path, rec.Code, tt.want)
		}
		if (tt.path == "/" || strings.HasPrefix(tt.path, "/static/")) && rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: X-Frame-Options %q, want DENY", tt.path, rec.Header().Get("X-Frame-Options"))
		}
		if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff (no answer read as another type)", tt.path, got)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); tt.path == "/" && !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET /: Content-Security-Policy %q, want frame-ancestors 'none'", csp)
		}
		if tt.path != "/" && strings.Contains(rec.Body.String(), `src="/static/app.js"`) {
			t.Errorf("GET %s serves the dashboard page", tt.path)
		}
	}
}

// TestRawRulesMaskMisplacedSecrets: the raw text of a rules file config
// refuses is served too (the editor shows what to fix), and a secret
// written where config does not look for one still shows masked: a Redis
// URL in place of its section, or under any other key, and a token in a
// second YAML document, which yaml.Unmarshal never reads (the audit of
// 2026-12-07 had both served in clear).
func TestRawRulesMaskMisplacedSecrets(t *testing.T) {
	for _, c := range []struct{ name, file, secret string }{
		{"a URL for its section", "cluster: \"redis://:p4ssCL@127.0.0.1:6379/0\"\nflowRules: []\n", "p4ssCL"},
		{"a URL in a string where a list belongs", "cluster:\n  clusterAddrs: redis://:p4ssAD@127.0.0.1:7000\n", "p4ssAD"},
		{"a URL under another key", "upstreams:\n  app: {targets: [\"http://u:p4ssUP@127.0.0.1:9\"]}\n", "p4ssUP"},
		{"a token in a second document", "flowRules: []\n---\nadmin:\n  token: p4ssDOC\n", "p4ssDOC"},
		{"a URL in a second document", "flowRules: []\n---\ncluster: {redis: \"redis://:p4ssDOC2@h:6379\"}\n", "p4ssDOC2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
			srv := admin.New(admin.Options{ConfigPath: path})
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090/api/rules/raw", nil))
			if strings.Contains(rec.Body.String(), c.secret) {
				t.Errorf("GET /api/rules/raw (%d) served the secret:\n%s", rec.Code, rec.Body.String())
			}
		})
	}
}
