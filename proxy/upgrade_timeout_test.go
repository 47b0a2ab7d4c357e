package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// TestUpgradeOutlivesTheRouteTimeout: the route timeout (300 ms here)
// bounds an upgrade's handshake, not the tunnel after it. Messages keep
// flowing through a WebSocket past the timeout, under every
// forwarder (upgrades always take the standard path); an upstream that
// never answers the handshake is still 504 at the timeout. Before, every
// WebSocket was cut when the route timeout ran out, messages flowing or not.
func TestUpgradeOutlivesTheRouteTimeout(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/silent" {
			<-r.Context().Done()
			return
		}
		conn, brw, ok := switchTo(w, r, "")
		if !ok {
			return
		}
		defer conn.Close()
		buf := make([]byte, 1024)
		for {
			n, err := brw.Read(buf)
			if err != nil {
				return
			}
			conn.Write(bytes.ToUpper(buf[:n]))
		}
	}))
	t.Cleanup(up.Close)
	for _, fwd := range []string{"standard", "auto", "fast"} {
		gw, _, _ := upstreamGateway(t, fwd, fmt.Sprintf(`
upstreams: { up: { targets: [%q], timeout: 300ms } }
routes: [{ path: /*, upstream: up, resource: ws }]
`, up.URL))
		c, br, resp := askUpgrade(t, gw, "/ws", "")
		if resp.StatusCode != 101 {
			t.Fatalf("%s: handshake %d, want 101", fwd, resp.StatusCode)
		}
		// Messages at 0, 200 and 400 ms: the last one past the timeout.
		for i := range 3 {
			if i > 0 {
				time.Sleep(200 * time.Millisecond)
			}
			msg := fmt.Sprintf("message %d", i)
			io.WriteString(c, msg)
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != strings.ToUpper(msg) {
				t.Fatalf("%s: %q after %v: %q %v, want its echo: the tunnel was cut", fwd, msg, time.Duration(i)*200*time.Millisecond, got, err)
			}
		}
		c.Close()

		start := time.Now()
		c, _, resp = askUpgrade(t, gw, "/silent", "")
		if resp.StatusCode != 504 {
			t.Fatalf("%s: a handshake never answered: %d, want 504", fwd, resp.StatusCode)
		}
		if waited := time.Since(start); waited < 250*time.Millisecond || waited > 5*time.Second {
			t.Errorf("%s: the unanswered handshake got its 504 after %v, want about the 300ms timeout", fwd, waited)
		}
		c.Close()
	}
}

// TestTunnelLifetimeIsNoResponseTime: a WebSocket's response time ends at
// the upstream's 101; how long the client keeps the tunnel open is no
// latency. Three tunnels held open 400 ms each do not open a slowRatio
// breaker of 200 ms, nor raise the resource's average response time, so a
// plain call after them passes. Before, they counted as three slow calls
// and the breaker refused the resource's every call.
func TestTunnelLifetimeIsNoResponseTime(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			io.WriteString(w, "ok")
			return
		}
		conn, brw, ok := switchTo(w, r, "")
		if !ok {
			return
		}
		defer conn.Close()
		io.Copy(io.Discard, brw) // until the client closes
	}))
	t.Cleanup(up.Close)
	gw, _, g := upstreamGateway(t, "", fmt.Sprintf(`
upstreams: { up: { targets: [%q] } }
routes: [{ path: /*, upstream: up, resource: ws }]
degradeRules:
  - { resource: ws, strategy: slowRatio, maxAllowedRtMs: 200, threshold: 0.5, minRequestAmount: 2, statIntervalMs: 60000, retryTimeoutMs: 30000 }
`, up.URL))
	var tunnels []net.Conn // held open together, 400 ms
	for range 3 {
		c, _, resp := askUpgrade(t, gw, "/ws", "")
		if resp.StatusCode != 101 {
			t.Fatalf("handshake: %d %s, want 101", resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"))
		}
		tunnels = append(tunnels, c)
	}
	time.Sleep(400 * time.Millisecond)
	for _, c := range tunnels {
		c.Close()
	}
	if st := settled(t, g); st.AvgRtMs >= 200 {
		t.Errorf("average response time %v ms after three tunnels: their lifetime was taken for latency", st.AvgRtMs)
	}
	resp, err := http.Get(gw + "/plain")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a plain call after three tunnels: %d %s, want 200 (no slow calls were made)", resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"))
	}
}

// TestTunnelEndsWhenTheUpstreamCloses: a WebSocket server ends the TCP
// connection first (RFC 6455 §7.1.1). The client is told (its read ends)
// and, if it keeps its side open, the tunnel ends tunnelLinger (1 s) later
// anyway, giving back its concurrency slot: a second tunnel is let in.
// Before, the gateway held the tunnel, and the slot, for as long as the
// client kept its side open (40 s and more in the audit), so a client
// that never closed held count slots for ever. Every forwarder (upgrades
// take the standard path).
func TestTunnelEndsWhenTheUpstreamCloses(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, ok := switchTo(w, r, "")
		if !ok {
			return
		}
		brw.WriteString("bye")
		brw.Flush()
		conn.Close()
	}))
	t.Cleanup(up.Close)
	for _, fwd := range []string{"standard", "auto", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			gw, _, g := upstreamGateway(t, fwd, fmt.Sprintf(`
upstreams: { up: { targets: [%q] } }
routes: [{ path: /*, upstream: up, resource: ws }]
flowRules: [{ resource: ws, grade: concurrency, count: 1 }]
`, up.URL))
			c, br, resp := askUpgrade(t, gw, "/ws", "")
			defer c.Close() // kept open: the client never closes its side
			if resp.StatusCode != 101 {
				t.Fatalf("handshake %d, want 101", resp.StatusCode)
			}
			if got, err := io.ReadAll(br); string(got) != "bye" || err != nil {
				t.Fatalf("the client read %q, %v; want bye and the end", got, err)
			}
			settled(t, g)
			c2, _, resp := askUpgrade(t, gw, "/ws", "")
			c2.Close()
			if resp.StatusCode != 101 {
				t.Fatalf("a second tunnel: %d, want 101: the first still holds the slot", resp.StatusCode)
			}
		})
	}
}

// TestOpenTunnelsLeaveTheAdaptiveGuard: an open WebSocket was answered
// (its 101), and so was an event stream (its head), however long either
// then lasts: the adaptive system guard, which weighs the calls waiting for
// their answer against the bandwidth-delay product, does not count them.
// With 30 of them open, plain calls one at a time all pass, on both
// forwarders. Before, each counted as a call in flight for its whole life,
// and the gateway shed every call while they were open (the handshakes
// too).
func TestOpenTunnelsLeaveTheAdaptiveGuard(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: hello\n\n")
			http.NewResponseController(w).Flush()
			<-r.Context().Done() // until the client leaves
		case r.Header.Get("Upgrade") != "":
			conn, brw, ok := switchTo(w, r, "")
			if !ok {
				return
			}
			defer conn.Close()
			io.Copy(io.Discard, brw) // until the client closes
		default:
			io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(up.Close)
	cfg, err := config.Parse("rules.yaml", []byte(fmt.Sprintf(`
upstreams: { up: { targets: [%q] } }
routes: [{ path: /*, upstream: up, resource: r }]
system: { adaptive: true }
`, up.URL)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ kind, fwd string }{{"tunnel", "standard"}, {"event stream", "standard"}, {"event stream", "fast"}} {
		t.Run(tc.kind+"/"+tc.fwd, func(t *testing.T) {
			clock := &fakeClock{}
			g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: clock, Forwarder: tc.fwd})
			if err := g.Load(cfg); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			srv := httptest.NewServer(g)
			t.Cleanup(srv.Close)
			plain := func() int {
				resp, err := http.Get(srv.URL + "/plain")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				clock.advance(100 * time.Millisecond)
				return resp.StatusCode
			}
			for range 25 { // 2.5 s: a whole second of history for the guard
				if st := plain(); st != 200 {
					t.Fatalf("warm-up: %d", st)
				}
			}
			for range 30 {
				if tc.kind == "tunnel" {
					c, _, resp := askUpgrade(t, srv.URL, "/ws", "")
					t.Cleanup(func() { c.Close() })
					if resp.StatusCode != 101 {
						t.Fatalf("handshake: %d %s, want 101", resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"))
					}
					continue
				}
				resp, err := http.Get(srv.URL + "/events")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { resp.Body.Close() })
				if resp.StatusCode != 200 {
					t.Fatalf("event stream: %d %s, want 200", resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"))
				}
			}
			shed := 0
			for range 20 {
				if plain() == http.StatusTooManyRequests {
					shed++
				}
			}
			if shed > 0 {
				t.Errorf("with 30 open, %d of 20 plain calls made one at a time were shed", shed)
			}
		})
	}
}
