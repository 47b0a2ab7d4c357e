package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestUpstreamIdleTimeout: a pooled connection to a target idle for the
// upstream's idleTimeout is closed by the gateway, on both forwarders, and
// the next request dials: set below a target's own keep-alive (Node's
// 5 s), the target never closes one under a request, the race that lost a
// POST (502) on the standard path. Within it the connection is reused.
func TestUpstreamIdleTimeout(t *testing.T) {
	for _, fwd := range []string{"fast", "standard"} {
		for _, c := range []struct {
			idle  string
			gap   time.Duration
			dials int64
		}{
			{"200ms", 700 * time.Millisecond, 2},
			{"10s", 700 * time.Millisecond, 1},
		} {
			up := newPoolUp(t, false, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				_, _ = io.WriteString(w, "ok")
			})
			g := loadedGateway(t, fwd, fmt.Sprintf(`
upstreams:
  up: { targets: [%q], idleTimeout: %s }
routes:
  - { path: /*, upstream: up }
`, up.URL, c.idle))
			gw := httptest.NewServer(g)
			for i := range 2 {
				if i > 0 {
					time.Sleep(c.gap)
				}
				if st, body := send(t, "POST", gw.URL+"/p", "order=1", false); st != 200 || body != "ok" {
					t.Errorf("%s, idleTimeout %s: POST %d: %d %q", fwd, c.idle, i+1, st, body)
				}
			}
			if n := up.dials.Load(); n != c.dials {
				t.Errorf("%s, idleTimeout %s: two POSTs %v apart took %d connections to the target, want %d", fwd, c.idle, c.gap, n, c.dials)
			}
			gw.Close()
		}
	}
}
