package proxy_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestOriginStatisticsShareTheRoutes: the limiter's per-origin statistics
// share one budget (100,000 origins) among the resources the routes name,
// so a client sending a made-up X-Origin with every request holds, over
// 1,000 routes, 100 statistics nodes a route, not 10,000 (about 630 bytes
// each: 6 GB over 1,000 routes).
func TestOriginStatisticsShareTheRoutes(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(up.Close)
	var b strings.Builder
	fmt.Fprintf(&b, "origin:\n  from: header:X-Origin\nupstreams:\n  up:\n    targets: [%q]\nroutes:\n", up.URL)
	for i := range 1000 {
		fmt.Fprintf(&b, "  - { path: /r%d, upstream: up, resource: r%d }\n", i, i)
	}
	srv, g := rulesGatewayOf(t, b.String())
	for i := range 150 {
		req, _ := http.NewRequest("GET", srv.URL+"/r0", nil)
		req.Header.Set("X-Origin", fmt.Sprint("made-up-", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for _, rs := range g.Current().Flow.Stats(g.Now()) {
		if rs.Resource == "r0" {
			if len(rs.Origins) != 100 || rs.Node.PassQps == 0 {
				t.Fatalf("r0 tracks %d origins (%v passes a second), want its share of 100", len(rs.Origins), rs.Node.PassQps)
			}
			return
		}
	}
	t.Fatal("no statistics for r0")
}
