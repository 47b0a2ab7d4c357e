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

// poolUp is an upstream that counts its open connections and its dials.
type poolUp struct {
	*httptest.Server
	open, dials atomic.Int64
}

func newPoolUp(t *testing.T, h2c bool, h http.HandlerFunc) *poolUp {
	u := &poolUp{Server: httptest.NewUnstartedServer(h)}
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			u.open.Add(1)
			u.dials.Add(1)
		case http.StateClosed, http.StateHijacked:
			u.open.Add(-1)
		}
	}
	if h2c {
		u.Config.Protocols = new(http.Protocols)
		u.Config.Protocols.SetHTTP1(true)
		u.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// settled waits until the upstream has want connections open.
func (u *poolUp) settled(t *testing.T, want int64, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); u.open.Load() != want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d upstream connections open, want %d", u.open.Load(), want)
		}
	}
}

// poolGateway serves /a from up on forwarder fwd; load swaps in rules with
// the upstream's connectTimeout set to connect.
func poolGateway(t *testing.T, up *poolUp, fwd, protocol string) (url string, load func(connect string)) {
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	t.Cleanup(g.Close)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv.URL, func(connect string) {
		t.Helper()
		cfg, err := config.Parse("rules.yaml", []byte(fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
    protocol: %s
    timeout: 1s
    connectTimeout: %s
routes:
  - { path: /a, upstream: up, resource: a, forwarder: %s }
`, up.URL, protocol, connect, fwd)))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Load(cfg); err != nil {
			t.Fatal(err)
		}
	}
}

func getOK(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Error(err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET %s: %d", url, resp.StatusCode)
	}
}

// TestReloadClosesUnusedPools: a reload that changes an upstream's
// connectTimeout closes the idle upstream connections of the pool it no
// longer uses, on both forwarders, instead of leaving them open until the
// idle timeout (90 s on the standard path), one pool per reload; a reload
// that changes nothing of the upstream keeps its pool: the next call dials
// nothing.
func TestReloadClosesUnusedPools(t *testing.T) {
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			up := newPoolUp(t, false, func(w http.ResponseWriter, r *http.Request) {})
			url, load := poolGateway(t, up, fwd, "http1")
			load("1s")
			getOK(t, url+"/a")
			up.settled(t, 1, 5*time.Second)
			load("1s")
			getOK(t, url+"/a")
			if n := up.dials.Load(); n != 1 {
				t.Fatalf("a reload that changed nothing: %d dials, want the 1 pooled connection reused", n)
			}
			for i := range 5 {
				load(fmt.Sprintf("%dms", 901+i))
				up.settled(t, 0, 5*time.Second)
				getOK(t, url+"/a")
				up.settled(t, 1, 5*time.Second)
			}
		})
	}
}

// TestReloadDrainsBusyH2Pool: an h2c upstream connection with a request of
// the old rules on it at the reload is not idle then, so closing the old
// pool's idle connections leaves it; it is closed once the old rules'
// route timeout (1 s) has passed, not 90 s after it went idle.
func TestReloadDrainsBusyH2Pool(t *testing.T) {
	in := make(chan struct{}, 1)
	up := newPoolUp(t, true, func(w http.ResponseWriter, r *http.Request) {
		in <- struct{}{}
		time.Sleep(300 * time.Millisecond)
	})
	url, load := poolGateway(t, up, "standard", "h2c")
	load("1s")
	done := make(chan struct{})
	go func() { defer close(done); getOK(t, url+"/a") }()
	<-in
	load("900ms") // while the call is on the connection
	<-done
	if n := up.open.Load(); n != 1 {
		t.Fatalf("%d connections open right after the call, want its 1 (busy at the reload, so not closed then)", n)
	}
	up.settled(t, 0, 5*time.Second)
}
