package admin_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice/admin"
)

// Wiring as main.go does it: metrics on a registry the admin listener serves,
// per-route counters resolved when a rules snapshot is built, and the
// history sampler running until shutdown.
func Example() {
	reg := prometheus.NewRegistry()
	metrics := admin.NewMetrics(reg)
	orders := metrics.Resource("orders") // once per configured resource

	srv := admin.New(admin.Options{
		Registry: reg,
		State:    func() admin.State { return admin.State{Ready: true} },
		Stats: func() []admin.ResourceStats {
			return []admin.ResourceStats{{Resource: "orders", NodeStats: admin.NodeStats{PassQps: 10}}}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Run(ctx)

	// On the request path: no allocation, no locks.
	orders.Pass(12 * time.Millisecond)
	orders.Block("flow", 40*time.Microsecond)

	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9090/readyz", nil))
	fmt.Println(rec.Code, rec.Body.String())
	// Output: 200 ready
}
