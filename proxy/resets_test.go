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
	"sync/atomic"
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
// listener does, with extra rules, and one route to an upstream that answers /slow after
// 20 ms (so a reset stream is still being served when its reset comes),
// /late after 200 ms (lateCalls counts those in flight),
// and answers /count with the length of its body; refused counts the connections the
// gateway closed, by reason.
func gatewayCounting(t *testing.T, tc *tls.Config, extra string) (addr string, refused func(why string) int) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			select {
			case <-time.After(20 * time.Millisecond):
			case <-r.Context().Done():
			}
		case "/late":
			lateCalls.Add(1)
			defer lateCalls.Add(-1)
			select {
			case <-time.After(200 * time.Millisecond):
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
	cfg, err := config.Parse("rules.yaml", []byte(fmt.Sprintf("upstreams: { up: { targets: [%q] } }\nroutes: [{ path: /*, upstream: up }]\n%s", up.URL, extra)))
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
	// lateFields asks for /late: answered 200 ms on, long after the
	// server has read the stream's reset however busy the machine (the
	// fast path waits for the answer, so a stream answered before its
	// reset was read is no premature end), and well within
	// prematureLifetime.
	lateFields  = [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "gw.test"}, {":path", "/late"}}
	lateCalls   atomic.Int64
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
	for _, provoke := range []bool{false, true} {
		name := "every stream reset"
		if provoke {
			name = "every stream reset by the server, provoked"
		}
		t.Run(name, func(t *testing.T) {
			addr, refused := gatewayCounting(t, server, "")
			c, err := h2test.Dial(addr, client)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ended := make(chan error, 1)
			go func() { ended <- c.Drain() }()
			sent := abandon(c, 2000, provoke)
			closedByGateway(t, ended, fmt.Sprintf("%d streams reset", sent))
			if n := refused(proxy.RefusedPrematureResets); n != 1 {
				t.Fatalf("%d connections counted closed for premature resets, want 1", n)
			}
			t.Logf("closed after %d streams were sent", sent)
			// The peer comes back at once: refused for a while.
			if again, err := h2test.Dial(addr, client); err == nil {
				a, err := again.Do(quickFields, nil)
				again.Close()
				if err == nil && a.Status != "" {
					t.Fatalf("the peer's next connection was answered %s, want it refused", a.Status)
				}
			}
			if n := refused(proxy.RefusedPenalized); n != 1 {
				t.Fatalf("%d of the peer's later connections refused, want 1", n)
			}
		})
	}

	t.Run("some streams abandoned, or none", func(t *testing.T) {
		addr, refused := gatewayCounting(t, server, "")
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
		if n := refused(proxy.RefusedPrematureResets) + refused(proxy.RefusedPenalized); n != 0 {
			t.Fatalf("%d connections closed or refused for premature resets, want none", n)
		}
	})
}

// abandon opens and resets (or has the server reset) up to n streams on
// c, paced below Go's own limit on queued handlers, and returns how many
// it sent before a write failed.
func abandon(c *h2test.Conn, n int, provoke bool) int {
	return abandonAsking(c, n, provoke, resetFields)
}

// abandonAsking is abandon with the streams asking for fields.
func abandonAsking(c *h2test.Conn, n int, provoke bool, fields [][2]string) int {
	sent := 0
	for ; sent < n; sent++ {
		if err := c.Abandon(fields, provoke); err != nil {
			break
		}
		if sent%50 == 49 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return sent
}

// A rule per connection costs an attacker one reconnect per 500 streams.
// A peer is judged across its connections: one that resets 500 streams
// within 10 s, 100 on each of its connections, has the connection that
// reset the 500th closed and its next ones refused for 10 s, while another
// peer is served. A peer that is one of trustedProxies (a load balancer
// many clients share) is judged by connection only.
func TestPrematureResetsJudgedByPeer(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		t.Run(fmt.Sprintf("trusted %v", trusted), func(t *testing.T) {
			extra := ""
			if trusted {
				extra = "trustedProxies: [127.0.0.1/32]\n"
			}
			addr, refused := gatewayCounting(t, nil, extra)
			conns := 0
			for ; conns < 12; conns++ {
				c, err := h2test.Dial(addr, nil)
				if err != nil {
					break // refused at accept: the peer is penalized
				}
				sent := abandonAsking(c, 100, false, lateFields)
				c.Close()
				// Its streams end before the next connection: once the
				// server reads the close, every stream left is cancelled,
				// and each call ends at its answer (a sleep of 20 ms let
				// a busy machine's handlers run connections behind).
				time.Sleep(10 * time.Millisecond) // the last handlers start
				for deadline := time.Now().Add(5 * time.Second); lateCalls.Load() != 0; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("connection %d: %d calls still in flight 5 s after it closed", conns+1, lateCalls.Load())
					}
				}
				if sent < 100 || refused(proxy.RefusedPenalized) > 0 {
					break
				}
			}
			cut, penalized := refused(proxy.RefusedPrematureResets), refused(proxy.RefusedPenalized)
			if trusted {
				if cut+penalized != 0 || conns != 12 {
					t.Fatalf("a trusted peer: %d connections cut and %d refused in %d, want none of 12", cut, penalized, conns)
				}
				return
			}
			// The connection that reset the 500th, and any other of the
			// peer's whose handlers were still seeing their resets.
			if cut < 1 || conns > 7 {
				t.Fatalf("%d connections cut for premature resets by connection %d, want one by about the 5th (500 resets)", cut, conns+1)
			}
			if a, err := h2cGetFrom(addr, "127.0.0.2"); err != nil || a != http.StatusOK {
				t.Fatalf("another peer got %d, %v; want 200", a, err)
			}
			if _, err := h2cGetFrom(addr, "127.0.0.1"); err == nil || refused(proxy.RefusedPenalized) == 0 {
				t.Fatalf("the penalized peer's new connection was served (%v)", err)
			}
		})
	}
}

// h2cGetFrom sends one GET over h2c from the loopback address from and
// returns its status.
func h2cGetFrom(addr, from string) (int, error) {
	tr := &http.Transport{Protocols: new(http.Protocols), DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("http://" + addr + "/x")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
