package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// capGateway serves a gateway through its Listener on 127.0.0.1, with the
// server section given, and counts the connections it refused by cap.
type capGateway struct {
	g    *proxy.Gateway
	addr string
	up   string

	mu      sync.Mutex
	refused map[string]int
}

func newCapGateway(t *testing.T, server string) *capGateway {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	t.Cleanup(up.Close)
	cg := &capGateway{up: up.URL, refused: map[string]int{}}
	cg.g = proxy.New(proxy.Deps{Log: zerolog.Nop(), OnConnRefused: func(why string) {
		cg.mu.Lock()
		cg.refused[why]++
		cg.mu.Unlock()
	}})
	cg.load(t, server)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: cg.g}
	go srv.Serve(cg.g.Listener(raw))
	t.Cleanup(func() { srv.Close() })
	cg.addr = raw.Addr().String()
	return cg
}

func (cg *capGateway) load(t *testing.T, server string) {
	t.Helper()
	cfg, err := config.Parse("rules.yaml", []byte(fmt.Sprintf(`server: %s
upstreams: { up: { targets: [%q] } }
routes: [{ path: /, upstream: up }]
`, server, cg.up)))
	if err != nil {
		t.Fatal(err)
	}
	if err := cg.g.Load(cfg); err != nil {
		t.Fatal(err)
	}
}

func (cg *capGateway) refusals(why string) int {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	return cg.refused[why]
}

// client is one keep-alive connection from a loopback address.
type client struct {
	c net.Conn
	r *bufio.Reader
}

func (cg *capGateway) dial(t *testing.T, from string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", cg.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// get sends one request on the connection and reports whether it was
// answered 200; a connection the gateway closed at accept reads EOF.
func (cl *client) get() bool {
	_ = cl.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(cl.c, "GET / HTTP/1.1\r\nHost: shop\r\n\r\n"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(cl.r, nil)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (cg *capGateway) waitOpen(t *testing.T, want int64) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); cg.g.OpenConnections() != want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d connections open, want %d", cg.g.OpenConnections(), want)
		}
	}
}

// A client that opens connections and sends nothing holds no rule's slot:
// only a cap on connections stops it from taking every descriptor. Past
// server.maxConnections (all peers together) or maxConnectionsPerIP (one
// peer), a connection is closed as it is accepted, the connections already
// open are served as before, and a connection that closes makes room.
func TestConnectionCaps(t *testing.T) {
	t.Run("maxConnections counts every peer", func(t *testing.T) {
		cg := newCapGateway(t, "{ maxConnections: 3 }")
		var open []*client
		for _, from := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"} {
			cl := cg.dial(t, from)
			if !cl.get() {
				t.Fatalf("connection from %s within the cap was not served", from)
			}
			open = append(open, cl)
		}
		if cg.dial(t, "127.0.0.4").get() {
			t.Fatal("a fourth connection past maxConnections 3 was served")
		}
		if n := cg.refusals(proxy.RefusedMaxConnections); n != 1 {
			t.Fatalf("%d refusals of maxConnections counted, want 1", n)
		}
		for i, cl := range open {
			if !cl.get() {
				t.Fatalf("connection %d, open before the cap was reached, was not served again", i)
			}
		}
		open[0].c.Close()
		cg.waitOpen(t, 2)
		if !cg.dial(t, "127.0.0.4").get() {
			t.Fatal("a connection after one closed was refused")
		}
	})

	t.Run("maxConnectionsPerIP counts one peer", func(t *testing.T) {
		cg := newCapGateway(t, "{ maxConnectionsPerIP: 2 }")
		for i := range 2 {
			if !cg.dial(t, "127.0.0.1").get() {
				t.Fatalf("connection %d of 127.0.0.1 within its cap was not served", i)
			}
		}
		if cg.dial(t, "127.0.0.1").get() {
			t.Fatal("a third connection of 127.0.0.1 past maxConnectionsPerIP 2 was served")
		}
		if !cg.dial(t, "127.0.0.2").get() {
			t.Fatal("another peer was refused for 127.0.0.1's connections")
		}
		if n := cg.refusals(proxy.RefusedMaxConnectionsPerIP); n != 1 {
			t.Fatalf("%d refusals of maxConnectionsPerIP counted, want 1", n)
		}
		if n := cg.refusals(proxy.RefusedMaxConnections); n != 0 {
			t.Fatalf("%d refusals of maxConnections counted, want 0", n)
		}
	})

	t.Run("a reload applies to the connections accepted after it", func(t *testing.T) {
		cg := newCapGateway(t, "{ maxConnections: 2 }")
		a, b := cg.dial(t, "127.0.0.1"), cg.dial(t, "127.0.0.1")
		if !a.get() || !b.get() {
			t.Fatal("connections within the cap were not served")
		}
		cg.load(t, "{ maxConnections: 3 }")
		c := cg.dial(t, "127.0.0.1")
		if !c.get() {
			t.Fatal("a connection within the raised cap was refused")
		}
		cg.load(t, "{ maxConnections: 1 }")
		if !a.get() || !b.get() || !c.get() {
			t.Fatal("a lowered cap cut connections already open")
		}
		if cg.dial(t, "127.0.0.1").get() {
			t.Fatal("a connection past the lowered cap was served")
		}
	})

	t.Run("every close gives its place back once", func(t *testing.T) {
		cg := newCapGateway(t, "{ maxConnections: 5, maxConnectionsPerIP: 5 }")
		var wg sync.WaitGroup
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					cl := cg.dial(t, "127.0.0.1")
					cl.get()
					cl.c.Close()
				}
			}()
		}
		wg.Wait()
		cg.waitOpen(t, 0)
		var open []*client
		for i := range 5 {
			cl := cg.dial(t, "127.0.0.1")
			if !cl.get() {
				t.Fatalf("after 100 connections came and went, connection %d of 5 was refused", i)
			}
			open = append(open, cl)
		}
		if cg.dial(t, "127.0.0.1").get() {
			t.Fatal("a sixth connection was served: a close was given back twice")
		}
	})
}

// A connection is counted from its accept until it is closed, and closed
// twice (crypto/tls and a hijacker may both close it) it gives one place
// back.
func TestConnectionCountedUntilClosed(t *testing.T) {
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := g.Listener(raw)
	defer ln.Close()
	c, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if n := g.OpenConnections(); n != 1 {
		t.Fatalf("%d open after an accept, want 1", n)
	}
	srv.Close()
	srv.Close()
	if n := g.OpenConnections(); n != 0 {
		t.Fatalf("%d open after two closes of one connection, want 0", n)
	}
}
