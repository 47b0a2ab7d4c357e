package proxy_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/net/http2"

	"sluice/config"
	"sluice/internal/h2test"
	"sluice/internal/testcert"
	"sluice/proxy"
)

// gatewayCounting serves a gateway over h1 and h2c (or h1 and h2 over
// TLS, with tc) through its Listener and ConnContext, as the traffic
// listener does, with one route to an upstream that answers /slow after
// 20 ms (so a reset stream is still being served when its reset comes)
// and answers /count with the length of its body; refused counts the connections the
// gateway closed, by reason.
func gatewayCounting(t *testing.T, tc *tls.Config) (addr string, refused func(why string) int) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			select {
			case <-time.After(20 * time.Millisecond):
			case <-r.Context().Done():
			}
		case "/count":
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprint(w, n)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	cfg, err := config.Parse("rules.yaml", []byte(fmt.Sprintf("upstreams: { up: { targets: [%q] } }\nroutes: [{ path: /*, upstream: up }]\n", up.URL)))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := map[string]int{}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), OnConnRefused: func(why string) {
		mu.Lock()
		n[why]++
		mu.Unlock()
	}})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: g, ConnContext: g.ConnContext, Protocols: new(http.Protocols), TLSConfig: tc}
	srv.Protocols.SetHTTP1(true)
	if tc != nil {
		srv.Protocols.SetHTTP2(true)
		go srv.ServeTLS(g.Listener(raw), "", "")
	} else {
		srv.Protocols.SetUnencryptedHTTP2(true)
		go srv.Serve(g.Listener(raw))
	}
	t.Cleanup(func() { srv.Close() })
	return raw.Addr().String(), func(why string) int {
		mu.Lock()
		defer mu.Unlock()
		return n[why]
	}
}

// closedByGateway waits for the end of a connection whose frames Drain
// reads (ended), after what, and fails t unless the gateway closed it: it
// is still open after 10 s, or Go's server ended it with a GOAWAY of its
// own.
func closedByGateway(t *testing.T, ended <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ended:
		var ce http2.ConnectionError
		if errors.As(err, &ce) {
			t.Fatalf("the connection ended with Go's own GOAWAY %v after %s, not the gateway's close", err, what)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the connection is still open after %s", what)
	}
}

var (
	resetFields = [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "gw.test"}, {":path", "/slow"}}
	quickFields = [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "gw.test"}, {":path", "/x"}}
)

// A client that opens HTTP/2 streams and resets each at once (rapid reset)
// has every one routed, checked and forwarded for two frames. The gateway
// closes such a connection once it has had 500 streams, most ended before
// their answer within a second of their start (Envoy's premature-reset
// rule): well before 2,000, counted and logged. A connection whose client
// abandons some of its requests (a third), or none, is served to the end.
func TestPrematureResetsCloseTheConnection(t *testing.T) {
	ca := testcert.NewCA(t, "resets CA")
	leaf := ca.Server(t, time.Now().Add(time.Hour), "127.0.0.1")
	for _, tc := range []struct {
		name   string
		server *tls.Config
		client *tls.Config
	}{
		{"h2c", nil, nil},
		{"h2 over TLS", &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) { prematureResets(t, tc.server, tc.client) })
	}
}

func prematureResets(t *testing.T, server, client *tls.Config) {
	addr, counted := gatewayCounting(t, server)
	refused := func() int { return counted(proxy.RefusedPrematureResets) }

	for _, provoke := range []bool{false, true} {
		name := "every stream reset"
		if provoke {
			name = "every stream reset by the server, provoked"
		}
		t.Run(name, func(t *testing.T) {
			before := refused()
			c, err := h2test.Dial(addr, client)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ended := make(chan error, 1)
			go func() { ended <- c.Drain() }()
			sent := 0
			for ; sent < 2000; sent++ {
				if err := c.Abandon(resetFields, provoke); err != nil {
					break
				}
				if sent%50 == 49 {
					time.Sleep(10 * time.Millisecond) // below Go's own limit on queued handlers
				}
			}
			closedByGateway(t, ended, fmt.Sprintf("%d streams reset", sent))
			if n := refused() - before; n != 1 {
				t.Fatalf("%d connections counted closed for premature resets, want 1", n)
			}
			t.Logf("closed after %d streams were sent", sent)
		})
	}

	t.Run("some streams abandoned, or none", func(t *testing.T) {
		before := refused()
		for _, every := range []int{3, 0} { // every third stream reset; none
			c, err := h2test.Dial(addr, client)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 700 {
				if every > 0 && i%every == 0 {
					if err := c.Abandon(resetFields, false); err != nil {
						t.Fatalf("abandoning stream %d: %v", i, err)
					}
					time.Sleep(time.Millisecond) // its handler sees the reset
					continue
				}
				a, err := c.Do(quickFields, nil)
				if err != nil || a.Status != "200" {
					t.Fatalf("every %d reset: request %d answered %q, %v", every, i, a.Status, err)
				}
			}
			c.Close()
		}
		if n := refused(); n != before {
			t.Fatalf("%d connections closed for premature resets, want none", n-before)
		}
	})
}
