package proxy_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// TestReloadClosesUnusedPools: a reload that changes an upstream's
// connectTimeout closes the idle upstream connections of the pool it no
// longer uses, on both forwarders, instead of leaving them open until the
// idle timeout (90 s on the standard path), one pool per reload; a reload
// that changes nothing of the upstream keeps its connection.
func TestReloadClosesUnusedPools(t *testing.T) {
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			var open atomic.Int64
			up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				switch s {
				case http.StateNew:
					open.Add(1)
				case http.StateClosed, http.StateHijacked:
					open.Add(-1)
				}
			}
			up.Start()
			t.Cleanup(up.Close)
			load := func(g *proxy.Gateway, connect string) {
				t.Helper()
				cfg, err := config.Parse("rules.yaml", []byte(fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
    connectTimeout: %s
routes:
  - { path: /a, upstream: up, resource: a, forwarder: %s }
`, up.URL, connect, fwd)))
				if err != nil {
					t.Fatal(err)
				}
				if err := g.Load(cfg); err != nil {
					t.Fatal(err)
				}
			}
			g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
			t.Cleanup(g.Close)
			srv := httptest.NewServer(g)
			t.Cleanup(srv.Close)
			call := func() {
				t.Helper()
				resp, err := http.Get(srv.URL + "/a")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			settled := func(want int64) {
				t.Helper()
				for deadline := time.Now().Add(5 * time.Second); open.Load() != want; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("%d upstream connections open, want %d", open.Load(), want)
					}
				}
			}
			load(g, "1s")
			call()
			settled(1)
			load(g, "1s") // the same upstream: its pool and connection stay
			call()
			settled(1)
			for i := range 5 {
				load(g, fmt.Sprintf("%dms", 1001+i))
				settled(0)
				call()
				settled(1)
			}
		})
	}
}
