package admin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sluice/admin"
)

func TestWritesNeedTheToken(t *testing.T) {
	f := newFixture(t, "s3cret")
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"no header", "", http.StatusUnauthorized},
		{"wrong token", "Bearer nope", http.StatusUnauthorized},
		{"token as basic", "Basic s3cret", http.StatusUnauthorized},
		{"longer token", "Bearer s3cret2", http.StatusUnauthorized},
		{"right token", "Bearer s3cret", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := string(f.file(t))
			hdr := map[string]string{"If-Match": f.etag(t), "Content-Type": "application/json"}
			if tc.auth != "" {
				hdr["Authorization"] = tc.auth
			}
			code, body, _ := f.do(t, "PUT", "/api/rules/flowRules/0", hdr, `{"count": 42}`)
			if code != tc.want {
				t.Fatalf("PUT: %d %s, want %d", code, body, tc.want)
			}
			if changed := string(f.file(t)) != before; changed != (tc.want == 200) {
				t.Fatalf("file changed = %v after a %d", changed, code)
			}
			delete(hdr, "If-Match")
			delete(hdr, "Content-Type")
			reloads := f.reloads.Load()
			code, body, _ = f.do(t, "POST", "/api/reload", hdr, "")
			if want := map[int]int{200: 202, 401: 401}[tc.want]; code != want {
				t.Fatalf("POST /api/reload: %d %s, want %d", code, body, want)
			}
			if called := f.reloads.Load() > reloads; called != (tc.want == 200) {
				t.Fatalf("Reload called = %v after a %d", called, code)
			}
		})
	}
	// Reads stay open.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/api/rules", "/api/rules/raw", "/api/resources", "/api/history", "/"} {
		if code, body, _ := f.do(t, "GET", p, nil, ""); code != 200 {
			t.Errorf("GET %s without token: %d %s", p, code, body)
		}
	}
}

func TestNoTokenMeansOpenWrites(t *testing.T) {
	f := newFixture(t, "")
	if code, body, _ := f.do(t, "POST", "/api/reload", nil, ""); code != http.StatusAccepted || f.reloads.Load() != 1 {
		t.Fatalf("POST /api/reload: %d %s, reloads %d", code, body, f.reloads.Load())
	}
}

func TestReadyz(t *testing.T) {
	var ready atomic.Bool
	srv := admin.New(admin.Options{State: func() admin.State { return admin.State{Ready: ready.Load()} }})
	get := func(p string) int {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090"+p, nil))
		return rec.Code
	}
	if c := get("/readyz"); c != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before rules load: %d, want 503", c)
	}
	if c := get("/healthz"); c != http.StatusOK {
		t.Fatalf("/healthz before rules load: %d, want 200", c)
	}
	ready.Store(true)
	if c := get("/readyz"); c != http.StatusOK {
		t.Fatalf("/readyz after rules load: %d, want 200", c)
	}
}

func TestAPIRulesAndResources(t *testing.T) {
	loaded := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	stats := []admin.ResourceStats{{
		Resource:  "orders",
		NodeStats: admin.NodeStats{PassQps: 100, BlockQps: 20, SuccessQps: 98, ErrorQps: 2, AvgRtMs: 12.5, Concurrency: 7},
		Origins:   []admin.NamedStats{{Name: "mobile", NodeStats: admin.NodeStats{PassQps: 60, BlockQps: 20}}},
		Entrances: []admin.NamedStats{{Name: "/orders/*", NodeStats: admin.NodeStats{PassQps: 100}}},
	}}
	srv := admin.New(admin.Options{
		Token: "t",
		State: func() admin.State {
			return admin.State{Ready: true, Config: map[string]any{"flowRules": []any{map[string]any{"resource": "orders", "count": 100}}},
				Path: "/etc/sluice/rules.yaml", LoadedAt: loaded, LastReload: loaded.Add(time.Minute),
				LastError: "rules.yaml:3: flowRules[0].count: must be >= 0"}
		},
		Stats: func() []admin.ResourceStats { return stats },
	})
	get := func(p string, v any) {
		t.Helper()
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090"+p, nil))
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			t.Fatalf("GET %s: %d %s", p, rec.Code, rec.Header().Get("Content-Type"))
		}
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
	}
	var rules map[string]any
	// Without the token, lastError says that the reload failed, not what
	// it quoted of the file (a credential, perhaps); with it, all.
	get("/api/rules", &rules)
	if got := rules["lastError"]; got != "the last reload failed (1 error); read them with the admin token (Authorization: Bearer), or in the log" {
		t.Errorf("/api/rules' lastError for a reader who cannot write: %q", got)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "http://127.0.0.1:9090/api/rules", nil)
	req.Header.Set("Authorization", "Bearer t")
	srv.Handler().ServeHTTP(rec, req)
	if err := json.Unmarshal(rec.Body.Bytes(), &rules); err != nil {
		t.Fatal(err)
	}
	if rules["path"] != "/etc/sluice/rules.yaml" || rules["loadedAt"] != "2026-11-29T12:00:00Z" ||
		rules["lastReload"] != "2026-11-29T12:01:00Z" || !strings.Contains(rules["lastError"].(string), "must be >= 0") ||
		rules["ready"] != true || rules["tokenRequired"] != true {
		t.Errorf("/api/rules = %v", rules)
	}
	if fr := rules["config"].(map[string]any)["flowRules"].([]any)[0].(map[string]any); fr["count"] != 100.0 {
		t.Errorf("/api/rules config = %v", rules["config"])
	}
	var res struct {
		Resources []map[string]any `json:"resources"`
	}
	get("/api/resources", &res)
	want := map[string]any{"resource": "orders", "passQps": 100.0, "blockQps": 20.0, "successQps": 98.0, "errorQps": 2.0, "avgRtMs": 12.5, "concurrency": 7.0}
	if len(res.Resources) != 1 {
		t.Fatalf("/api/resources = %v", res)
	}
	for k, v := range want {
		if res.Resources[0][k] != v {
			t.Errorf("/api/resources %s = %v, want %v", k, res.Resources[0][k], v)
		}
	}
	if o := res.Resources[0]["origins"].([]any)[0].(map[string]any); o["name"] != "mobile" || o["blockQps"] != 20.0 {
		t.Errorf("origin = %v", o)
	}
	if e := res.Resources[0]["entrances"].([]any)[0].(map[string]any); e["name"] != "/orders/*" || e["passQps"] != 100.0 {
		t.Errorf("entrance = %v", e)
	}
}

func TestDashboardIsSelfContained(t *testing.T) {
	srv := admin.New(admin.Options{})
	for _, p := range []string{"/", "/static/app.js", "/static/style.css"} {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090"+p, nil))
		if rec.Code != 200 || rec.Body.Len() == 0 {
			t.Fatalf("GET %s: %d", p, rec.Code)
		}
		// The SVG namespace is a name, not a fetch.
		body := strings.ReplaceAll(rec.Body.String(), `"http://www.w3.org/2000/svg"`, "")
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") || strings.Contains(body, "//cdn") {
			t.Errorf("%s refers to the network; the dashboard must work offline", p)
		}
	}
}

// TestRouteMethods: a GET route serves HEAD too (RFC 9110 9.1: uptime
// checkers probe /healthz and /readyz with HEAD), and a method a route
// does not serve is 405 with Allow, /metrics included (SPEC 5: GET /metrics),
// HEAD listed where it is served.
func TestRouteMethods(t *testing.T) {
	srv := admin.New(admin.Options{State: func() admin.State { return admin.State{Ready: true} }})
	for _, tt := range []struct {
		method, path string
		want         int
		allow        string // with 405: what Allow must list
	}{
		{"HEAD", "/healthz", 200, ""},
		{"HEAD", "/readyz", 200, ""},
		{"HEAD", "/metrics", 200, ""},
		{"GET", "/metrics", 200, ""},
		{"POST", "/metrics", 405, "GET, HEAD"},
		{"PUT", "/metrics", 405, "GET"},
		{"DELETE", "/metrics", 405, "GET"},
		{"PATCH", "/metrics", 405, "GET"},
		{"POST", "/healthz", 405, "GET, HEAD"},
		{"HEAD", "/api/rules", 200, ""},
		{"POST", "/api/rules", 405, "GET, HEAD"},
	} {
		req := httptest.NewRequest(tt.method, "http://127.0.0.1:9090"+tt.path, nil)
		req.RemoteAddr = loopback
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		allow := rec.Header().Values("Allow") // in chi's order, which is a map's
		lists := true
		for m := range strings.SplitSeq(tt.allow, ", ") {
			lists = lists && (m == "" || slices.Contains(allow, m))
		}
		if rec.Code != tt.want || !lists {
			t.Errorf("%s %s: %d, Allow %q; want %d (Allow listing %q)", tt.method, tt.path, rec.Code, allow, tt.want, tt.allow)
		}
	}
}
