package admin_test

import (
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice/admin"
)

func scrape(t *testing.T, srv *admin.Server) string {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func TestMetricsExposeSpecSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := admin.NewMetrics(reg)
	orders := m.Resource("orders")
	for i := 0; i < 7; i++ {
		orders.Pass(20 * time.Millisecond)
	}
	orders.Block("flow", time.Millisecond)
	orders.Block("flow", time.Millisecond)
	orders.Block("param", time.Millisecond)
	orders.Block("degrade", time.Millisecond)
	orders.Block("system", time.Millisecond)
	orders.Block("authority", time.Millisecond)
	orders.DryRun()
	orders.PrioritizedWait()
	orders.Error(3 * time.Second)
	m.Reload(true, time.Unix(1_800_000_000, 500_000_000))
	m.Reload(false, time.Unix(1_800_000_100, 0))
	m.CircuitState("orders", 1)
	m.ClusterRedis("sentinel", []admin.RedisMaster{{Addr: "10.0.0.1:6379", Up: true}})
	m.ClusterRedis("sentinel", []admin.RedisMaster{{Addr: "10.0.0.2:6379", Up: true}}) // failed over
	srv := admin.New(admin.Options{Registry: reg, Stats: func() []admin.ResourceStats {
		return []admin.ResourceStats{{Resource: "orders", NodeStats: admin.NodeStats{Concurrency: 4}}}
	}})
	text := scrape(t, srv)
	for _, want := range []string{
		`sluice_requests_total{resource="orders",result="pass"} 7`,
		`sluice_requests_total{resource="orders",result="block"} 6`,
		`sluice_requests_total{resource="orders",result="error"} 1`,
		`sluice_blocked_total{reason="flow",resource="orders"} 2`,
		`sluice_blocked_total{reason="param",resource="orders"} 1`,
		`sluice_blocked_total{reason="degrade",resource="orders"} 1`,
		`sluice_blocked_total{reason="system",resource="orders"} 1`,
		`sluice_blocked_total{reason="authority",resource="orders"} 1`,
		`sluice_blocked_total{reason="dryrun",resource="orders"} 1`,
		`sluice_prioritized_waits_total{resource="orders"} 1`,
		`sluice_request_duration_seconds_count{resource="orders",result="pass"} 7`,
		`sluice_request_duration_seconds_bucket{resource="orders",result="pass",le="0.025"} 7`,
		`sluice_request_duration_seconds_bucket{resource="orders",result="error",le="2.5"} 0`,
		`sluice_request_duration_seconds_count{resource="orders",result="error"} 1`,
		`sluice_request_duration_seconds_bucket{resource="orders",result="error",le="5"} 1`,
		`sluice_request_duration_seconds_bucket{resource="orders",result="error",le="+Inf"} 1`,
		`sluice_request_duration_seconds_sum{resource="orders",result="block"} 0.006`,
		`sluice_concurrency{resource="orders"} 4`,
		`sluice_rules_reloads_total{result="ok"} 1`,
		`sluice_rules_reloads_total{result="failed"} 1`,
		`sluice_rules_last_reload_success_timestamp_seconds 1.8000000005e+09`,
		`sluice_circuit_state{resource="orders"} 1`,
		`sluice_cluster_redis_up{form="sentinel",master="10.0.0.2:6379"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, "10.0.0.1:6379") {
		t.Errorf("/metrics still has the master before the failover")
	}
	if t.Failed() {
		t.Log(text)
	}
}

// TestMetricsCardinalityIsBoundedByConfig drives the metrics API the way the
// proxy does while requests carry 10,000 distinct paths and origins: the only
// label values are the configured resource names and the fixed results and
// reasons, whatever the requests carry.
func TestMetricsCardinalityIsBoundedByConfig(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := admin.NewMetrics(reg)
	configured := []string{"orders", "users", "search"}
	routes := make(map[string]*admin.ResourceMetrics)
	for _, name := range configured {
		routes[name] = m.Resource(name) // once per route, at snapshot build
	}
	reasons := []string{"flow", "param", "degrade", "system", "authority"}
	for i := 0; i < 10_000; i++ {
		path, origin := fmt.Sprintf("/orders/%d", i), fmt.Sprintf("client-%d", i)
		_, _ = path, origin // request data reaches the limiter, never a label
		r := routes[configured[i%len(configured)]]
		switch i % 4 {
		case 0:
			r.Pass(time.Millisecond)
		case 1:
			r.Block(reasons[i%len(reasons)], time.Microsecond)
		case 2:
			r.DryRun()
		case 3:
			r.Error(time.Second)
		}
		// A reason string the caller got wrong collapses into one value.
		r.Block(fmt.Sprintf("bogus-%d", i), 0)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, mf := range mfs {
		series[mf.GetName()] = len(mf.GetMetric())
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "resource" && routes[l.GetValue()] == nil {
					t.Errorf("%s has resource=%q, not a configured name", mf.GetName(), l.GetValue())
				}
			}
		}
	}
	n := len(configured)
	want := map[string]int{
		"sluice_requests_total":           n * 3, // pass, block, error
		"sluice_blocked_total":            n * 7, // flow, param, degrade, system, authority, dryrun, unknown
		"sluice_request_duration_seconds": n * 3,
		"sluice_rules_reloads_total":      2,
	}
	for name, w := range want {
		if series[name] != w {
			t.Errorf("%s: %d series, want %d", name, series[name], w)
		}
	}
}

// A resource's series cost little: a document of 10,000 routes names
// 10,000 resources, and client_golang's vectors held 8 KiB each (80 MB).
// Every series still exists from Resource on.
func TestResourceMetricsAreSmall(t *testing.T) {
	const n = 10_000
	reg := prometheus.NewRegistry()
	m := admin.NewMetrics(reg)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		m.Resource(fmt.Sprintf("resource-%d", i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n; per > 1024 {
		t.Errorf("a resource's metrics hold %d bytes, want under 1 KiB", per)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if want := map[string]int{"sluice_requests_total": 3 * n, "sluice_blocked_total": 6 * n, "sluice_request_duration_seconds": 3 * n}[mf.GetName()]; want != 0 && len(mf.GetMetric()) != want {
			t.Errorf("%s: %d series, want %d", mf.GetName(), len(mf.GetMetric()), want)
		}
	}
	runtime.KeepAlive(m)
}

func TestNilResourceMetricsIgnoresCalls(t *testing.T) {
	var r *admin.ResourceMetrics
	r.Pass(0)
	r.Block("flow", 0)
	r.DryRun()
	r.Error(0)
}

func TestResourceMetricsDoNotAllocate(t *testing.T) {
	r := admin.NewMetrics(prometheus.NewRegistry()).Resource("orders")
	for name, f := range map[string]func(){
		"Pass":   func() { r.Pass(time.Millisecond) },
		"Block":  func() { r.Block("flow", time.Millisecond) },
		"DryRun": func() { r.DryRun() },
		"Error":  func() { r.Error(time.Millisecond) },
		"Wait":   func() { r.PrioritizedWait() },
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s: %v allocs per call, want 0", name, a)
		}
	}
}

func BenchmarkResourceMetrics(b *testing.B) {
	r := admin.NewMetrics(prometheus.NewRegistry()).Resource("orders")
	for _, bc := range []struct {
		name string
		f    func()
	}{
		{"Pass", func() { r.Pass(time.Millisecond) }},
		{"Block", func() { r.Block("system", time.Millisecond) }},
		{"DryRun", func() { r.DryRun() }},
		{"Error", func() { r.Error(time.Millisecond) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bc.f()
				}
			})
		})
	}
}
