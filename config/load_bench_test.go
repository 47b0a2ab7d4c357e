package config_test

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"sluice/admin"
	"sluice/config"
	"sluice/proxy"
)

// manyRoutes is a rules document of n routes, each with its own resource,
// one flow rule and one param rule on the route's path parameter: about
// 190 bytes a route, so 10,000 routes are 1.9 MB and 100,000 (19 MB) are
// over the 8 MiB a document may have.
func manyRoutes(n int) []byte {
	var b strings.Builder
	b.WriteString("upstreams:\n  app:\n    targets: [\"http://127.0.0.1:9001\"]\nroutes:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - path: /r%d/items/{id}\n    methods: [GET, POST]\n    upstream: app\n    resource: res-%d\n", i, i)
	}
	b.WriteString("flowRules:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - resource: res-%d\n    count: %d\n", i, 10+i%100)
	}
	b.WriteString("paramRules:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - resource: res-%d\n    param: path:id\n    count: 5\n", i)
	}
	return []byte(b.String())
}

// loadTwice does what a gateway does with data at start and at a reload
// of the same document (main's build and reloader): parse and validate,
// then build the snapshot (router, flow, param, degrade and system guards,
// block bodies, per-resource metrics) and put it in force; the second
// time every rule takes over the first one's state. The caller closes
// the gateway.
func loadTwice(tb testing.TB, data []byte, parse func(string, []byte) (*config.Config, error)) *proxy.Gateway {
	tb.Helper()
	metrics := admin.NewMetrics(prometheus.NewRegistry())
	gw := proxy.New(proxy.Deps{Log: zerolog.Nop(), Observer: func(res string) proxy.Observer { return metrics.Resource(res) }})
	for range 2 {
		cfg, err := parse("rules.yaml", data)
		if err != nil {
			tb.Fatal(err)
		}
		if err := gw.Load(cfg); err != nil {
			tb.Fatal(err)
		}
	}
	return gw
}

// BenchmarkLoadDocument loads documents of 1,000, 10,000 and 100,000
// routes (each with a flow rule and a param rule) as a start and a reload
// do: ns/route (wall clock), cpu-ns/route (the process's CPU time, garbage
// collection included, which a busy machine inflates less) and B/route
// (allocated) are per route of one start plus one reload, heapB/route what
// the loaded gateway holds. They stay flat as the document grows: loading
// is linear.
//
//	go test -run XXX -bench BenchmarkLoadDocument -benchmem ./config/
func BenchmarkLoadDocument(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		data := manyRoutes(n)
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			cpu0 := cpuTime()
			for b.Loop() {
				loadTwice(b, data, config.ParseAnySize).Close()
			}
			cpu := cpuTime() - cpu0
			runtime.ReadMemStats(&after)
			per := float64(b.N) * float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/route")
			b.ReportMetric(float64(cpu.Nanoseconds())/per, "cpu-ns/route")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/per, "B/route")
			b.ReportMetric(float64(heldBy(func() func() {
				gw := loadTwice(b, data, config.ParseAnySize)
				return gw.Close
			}))/float64(n), "heapB/route")
		})
	}
}

// heldBy returns the heap bytes that what load builds holds once the
// garbage is collected; load returns what releases it.
func heldBy(load func() (release func())) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	release := load()
	runtime.GC()
	runtime.ReadMemStats(&after)
	release()
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// TestLoadTenThousandRoutes: a document of 10,000 routes, 10,000 flow
// rules and 10,000 param rules (SPEC §3 Reload), within the 8 MiB limit,
// loads through Parse and the gateway's build, at start and at a reload,
// and the gateway then holds under 100 MB of heap (it held 314 MB: 15 KiB
// a param rule of empty LRU shards, 8 KiB a resource of Prometheus series).
func TestLoadTenThousandRoutes(t *testing.T) {
	data := manyRoutes(10_000)
	if len(data) > config.MaxDocumentBytes {
		t.Fatalf("the document is %d bytes, over the limit", len(data))
	}
	var gw *proxy.Gateway
	var took, cpu time.Duration
	held := heldBy(func() func() {
		start, cpu0 := time.Now(), cpuTime()
		gw = loadTwice(t, data, config.Parse)
		took, cpu = time.Since(start), cpuTime()-cpu0
		return func() {}
	})
	defer gw.Close()
	cfg := gw.Current().Config
	if len(cfg.Routes) != 10_000 || len(cfg.FlowRules) != 10_000 || len(cfg.ParamRules) != 10_000 {
		t.Fatalf("loaded %d routes, %d flow rules, %d param rules; want 10,000 each", len(cfg.Routes), len(cfg.FlowRules), len(cfg.ParamRules))
	}
	t.Logf("%d bytes: a start and a reload took %v (%v of CPU); the gateway holds %d MB of heap (%d B a route)",
		len(data), took.Round(time.Millisecond), cpu.Round(time.Millisecond), held>>20, held/10_000)
	if held > 100<<20 {
		t.Errorf("the loaded gateway holds %d MB of heap, want under 100 MB", held>>20)
	}
}

// cpuTime is the CPU time the process has used (user and system), which a
// busy machine inflates less than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
