package admin_test

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice/admin"
)

func exampleUpstreams(until time.Time) []admin.UpstreamStats {
	return []admin.UpstreamStats{{
		Name: "orders", Balance: "roundRobin", RequestsPerSecond: 100, RetriesPerSecond: 2,
		Targets: []admin.TargetStats{
			{URL: "http://10.0.0.1:9001", Weight: 1, Healthy: true, Available: true, InFlight: 3, RequestsPerSecond: 60},
			{URL: "http://10.0.0.2:9001", Weight: 3, Healthy: true, EjectedUntil: &until, ErrorsPerSecond: 5},
			{URL: "http://10.0.0.3:9001", Weight: 1, Healthy: false},
		},
	}}
}

// TestUpstreamsAPI: GET /api/upstreams shows each upstream and target as
// the gateway reports it, and /metrics has every sluice_upstream_* series.
func TestUpstreamsAPI(t *testing.T) {
	until := time.Date(2026, 12, 1, 12, 0, 30, 0, time.UTC)
	reg := prometheus.NewRegistry()
	m := admin.NewMetrics(reg)
	srv := admin.New(admin.Options{Registry: reg, Upstreams: func() []admin.UpstreamStats { return exampleUpstreams(until) }})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090/api/upstreams", nil))
	var body struct {
		Upstreams []map[string]any `json:"upstreams"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 200 {
		t.Fatalf("GET /api/upstreams: %d %s", rec.Code, rec.Body)
	}
	if len(body.Upstreams) != 1 {
		t.Fatalf("upstreams: %v", body.Upstreams)
	}
	ts := body.Upstreams[0]["targets"].([]any)
	b := ts[1].(map[string]any)
	if b["ejectedUntil"] != "2026-12-01T12:00:30Z" || b["available"] != false || b["weight"] != 3.0 || b["errorsPerSecond"] != 5.0 {
		t.Errorf("ejected target: %v", b)
	}
	if a := ts[0].(map[string]any); a["ejectedUntil"] != nil || a["healthy"] != true || a["inFlight"] != 3.0 {
		t.Errorf("healthy target: %v", a)
	}

	tm := m.Target("orders", "http://10.0.0.2:9001")
	tm.Answered(200)
	tm.Answered(503)
	tm.Answered(503)
	tm.Answered(0)
	tm.Ejected()
	m.Upstream("orders").Retried()
	m.Upstream("orders").Panicked()
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090/metrics", nil))
	text, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`sluice_upstream_requests_total{code="2xx",target="http://10.0.0.2:9001",upstream="orders"} 1`,
		`sluice_upstream_requests_total{code="5xx",target="http://10.0.0.2:9001",upstream="orders"} 2`,
		`sluice_upstream_requests_total{code="error",target="http://10.0.0.2:9001",upstream="orders"} 1`,
		`sluice_upstream_ejections_total{target="http://10.0.0.2:9001",upstream="orders"} 1`,
		`sluice_upstream_retries_total{upstream="orders"} 1`,
		`sluice_upstream_panic_total{upstream="orders"} 1`,
		`sluice_upstream_target_up{target="http://10.0.0.1:9001",upstream="orders"} 1`,
		`sluice_upstream_target_up{target="http://10.0.0.2:9001",upstream="orders"} 0`,
		`sluice_upstream_target_up{target="http://10.0.0.3:9001",upstream="orders"} 0`,
	} {
		if !strings.Contains(string(text), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestForgottenUpstreamSeriesGo: the series of a target or upstream that a
// reload dropped leave /metrics; the others stay.
func TestForgottenUpstreamSeriesGo(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := admin.NewMetrics(reg)
	srv := admin.New(admin.Options{Registry: reg})
	gone, kept := "http://10.0.0.9:9001", "http://10.0.0.1:9001"
	for _, u := range []string{gone, kept} {
		m.Target("orders", u).Answered(200)
		m.Target("orders", u).Ejected()
	}
	m.Upstream("orders").Retried()
	m.Upstream("users").Retried()
	m.Upstream("users").Panicked()
	m.ForgetTarget("orders", gone)
	m.ForgetUpstream("users")
	text := scrape(t, srv)
	for _, stale := range []string{gone, `upstream="users"`} {
		if strings.Contains(text, stale) {
			t.Errorf("/metrics still has series of %s", stale)
		}
	}
	for _, want := range []string{
		`sluice_upstream_requests_total{code="2xx",target="http://10.0.0.1:9001",upstream="orders"} 1`,
		`sluice_upstream_ejections_total{target="http://10.0.0.1:9001",upstream="orders"} 1`,
		`sluice_upstream_retries_total{upstream="orders"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
