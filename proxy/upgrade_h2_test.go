package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
)

// TestUpgradeToAnH2UpstreamIsIgnored: HTTP/2 has no Upgrade, so a
// WebSocket handshake routed to an h2c (or h2) upstream cannot be sent as
// asked. The gateway ignores the Upgrade, as RFC 9110 7.8 lets a server do
// (and as it does an h2c upgrade): the upstream gets a plain request and
// the client its answer. Before, Go's HTTP/2 client refused the request
// locally, the client got 502, and each was charged to the target as its
// failure: ten such requests from any client ejected a healthy target.
func TestUpgradeToAnH2UpstreamIsIgnored(t *testing.T) {
	var got, upgrades atomic.Int64
	srv := h2cUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		if len(r.Header["Upgrade"]) > 0 {
			upgrades.Add(1)
		}
		w.WriteHeader(http.StatusUpgradeRequired)
		io.WriteString(w, "no websocket here")
	})
	gw, uc, g := upstreamGateway(t, "", fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
    protocol: h2c
    passive: {consecutiveFailures: 2, ejectFor: 1h, maxEjectedPercent: 100}
routes: [{path: /*, upstream: up, resource: r}]
`, srv.URL))
	const n = 10
	for i := range n {
		req, _ := http.NewRequest("GET", gw+"/chat", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		req.Header.Set("Sec-WebSocket-Version", "13")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUpgradeRequired {
			t.Fatalf("handshake %d: %d, want the upstream's own 426", i+1, resp.StatusCode)
		}
	}
	if got.Load() != n || upgrades.Load() != 0 {
		t.Errorf("the upstream got %d requests, %d with Upgrade; want %d, none", got.Load(), upgrades.Load(), n)
	}
	tgt := g.Upstreams(g.Now())[0].Targets[0]
	if tgt.Ejected || !tgt.Available || uc.ejected[srv.URL] != 0 || uc.count(srv.URL, 0) != 0 {
		t.Errorf("a target that answered every handshake was charged: %+v, %d errors", tgt, uc.count(srv.URL, 0))
	}
}
