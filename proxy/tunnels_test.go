package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// echoTunnels is a gateway (standard path) in front of an upstream that
// takes every upgrade and echoes until a side closes, with one route of
// resource r under a concurrency rule of 1, and settings before the rest.
func echoTunnels(t *testing.T, settings string) (*proxy.Gateway, *httptest.Server) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, ok := switchTo(w, r, "")
		if !ok {
			return
		}
		defer conn.Close()
		io.Copy(brw, brw)
	}))
	t.Cleanup(up.Close)
	cfg, err := config.Parse("rules.yaml", []byte(settings+fmt.Sprintf(`
upstreams: { up: { targets: [%q] } }
routes: [{ path: /*, upstream: up, resource: r }]
flowRules: [{ resource: r, grade: concurrency, count: 1 }]
`, up.URL)))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: "standard"})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv
}

// TestDrainWaitsForTunnels: net/http's Shutdown does not wait for a
// hijacked connection, so a drain ended every WebSocket as soon as the
// ordinary requests were done: the process exited under them. A drain
// now waits for the WebSockets too, and past its deadline closes them,
// their calls ending (slots given back) before it returns.
func TestDrainWaitsForTunnels(t *testing.T) {
	g, srv := echoTunnels(t, "")
	open := func(t *testing.T) (echo func(string) error, closeIt func()) {
		t.Helper()
		c, br, resp := askUpgrade(t, srv.URL, "/ws", "")
		if resp.StatusCode != 101 {
			c.Close()
			t.Fatalf("handshake: %d %s, want 101", resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"))
		}
		return func(s string) error {
			if _, err := io.WriteString(c, s); err != nil {
				return err
			}
			b := make([]byte, len(s))
			if _, err := io.ReadFull(br, b); err != nil {
				return err
			}
			if string(b) != s {
				return fmt.Errorf("echo %q, want %q", b, s)
			}
			return nil
		}, func() { c.Close() }
	}

	t.Run("until the client closes", func(t *testing.T) {
		echo, closeIt := open(t)
		drained := make(chan error, 1)
		go func() { drained <- g.DrainTunnels(context.Background()) }()
		select {
		case err := <-drained:
			t.Fatalf("the drain ended (%v) with a WebSocket open", err)
		case <-time.After(200 * time.Millisecond):
		}
		if err := echo("still there"); err != nil {
			t.Fatalf("the WebSocket during the drain: %v", err)
		}
		closeIt()
		select {
		case err := <-drained:
			if err != nil {
				t.Fatalf("drain: %v, want nil once the WebSocket closed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the drain did not end after the WebSocket closed")
		}
		settled(t, g)
	})

	t.Run("past the deadline", func(t *testing.T) {
		echo, closeIt := open(t)
		defer closeIt()
		ctx, cancel := context.WithCancel(context.Background())
		drained := make(chan error, 1)
		go func() { drained <- g.DrainTunnels(ctx) }()
		cancel()
		select {
		case err := <-drained:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("drain: %v, want the deadline's error", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the drain did not end at its deadline")
		}
		if err := echo("x"); err == nil {
			t.Fatal("the WebSocket still echoes after the drain's deadline")
		}
		// Its call has ended: the concurrency slot is free for the next.
		if st := settled(t, g); st.Concurrency != 0 {
			t.Fatalf("concurrency %d after the drain", st.Concurrency)
		}
		_, closeNext := open(t)
		closeNext()
	})
}

// TestIdleTunnelIsClosed: a WebSocket that carries no byte either way for
// server.tunnelIdleTimeout is closed, and its concurrency slot comes back;
// one that keeps talking, in either direction, stays open past it. Without
// it 1,000 WebSockets left idle held 1,000 slots, 82 MB and 4,000
// goroutines until their clients closed them (memory audit).
func TestIdleTunnelIsClosed(t *testing.T) {
	_, srv := echoTunnels(t, "server: { tunnelIdleTimeout: 300ms }\n")

	c, br, resp := askUpgrade(t, srv.URL, "/ws", "")
	if resp.StatusCode != 101 {
		t.Fatalf("handshake: %d, want 101", resp.StatusCode)
	}
	defer c.Close()
	// Talking every 100 ms for 900 ms: three idle timeouts, never idle.
	for i := range 9 {
		time.Sleep(100 * time.Millisecond)
		msg := fmt.Sprintf("m%d", i)
		io.WriteString(c, msg)
		b := make([]byte, len(msg))
		if _, err := io.ReadFull(br, b); err != nil || string(b) != msg {
			t.Fatalf("message %d after %d ms of talk: %q %v; a tunnel in use was closed", i, (i+1)*100, b, err)
		}
	}
	// Then silent: closed within the timeout and a little.
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("an idle tunnel: read %v after %v, want it closed about 300 ms on", err, time.Since(start))
	}
	// Its slot is back: a second WebSocket (count 1) is let in.
	deadline := time.Now().Add(2 * time.Second)
	for {
		c2, _, resp := askUpgrade(t, srv.URL, "/ws", "")
		c2.Close()
		if resp.StatusCode == 101 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the idle tunnel closed: %d, want 101 (its concurrency slot back)", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
