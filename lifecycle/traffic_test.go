package lifecycle

import (
	"bufio"
	"context"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"sluice/admin"
	"sluice/internal/logtest"
	"sluice/proxy"
	"sluice/tlsedge"
)

// TestTrafficServersTakeServerSection: the traffic listeners' servers use
// the server section, and -read-header-timeout wins over the file's.
func TestTrafficServersTakeServerSection(t *testing.T) {
	const file = "listen: \"127.0.0.1:0\"\nhttp2: {h2c: true}\n" +
		"server: {readHeaderTimeout: 3s, idleTimeout: 45s, sendTimeout: 2s, maxConcurrentStreams: 7}"
	for _, tt := range []struct {
		name       string
		opts       Options
		readHeader time.Duration
	}{
		{"from the file", Options{}, 3 * time.Second},
		{"-read-header-timeout overrides it", Options{ReadHeaderTimeout: time.Second}, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gw := proxy.New(proxy.Deps{Log: zerolog.Nop()})
			cfg := rulesAs(t, tt.opts, file) // as the gateway reads it, the flags applied
			tr, err := listenTraffic(cfg, gw, zerolog.Nop(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.close()
			srv := tr.servers[0]
			if srv.ReadHeaderTimeout != tt.readHeader || srv.IdleTimeout != 45*time.Second ||
				srv.HTTP2 == nil || srv.HTTP2.MaxConcurrentStreams != 7 {
				t.Errorf("readHeaderTimeout %v, idleTimeout %v, http2 %+v; want %v, 45s, 7 streams",
					srv.ReadHeaderTimeout, srv.IdleTimeout, srv.HTTP2, tt.readHeader)
			}
		})
	}
}

// TestAddrsNamePlainListenerWhileServing: once a plain listener with h2c
// serves, the start-up log and Instance.Addrs still name it "listen".
// net/http's Serve sets a TLSConfig on such a server in its own goroutine;
// reading that to tell TLS from plain raced it and named the plain
// listener "tls", leaving "listen" empty (a busy e2e run dialled "").
func TestAddrsNamePlainListenerWhileServing(t *testing.T) {
	cfg := rulesWith(t, "listen: \"127.0.0.1:0\"\nhttp2: {h2c: true}\n")
	gw := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	tr, err := listenTraffic(cfg, gw, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.shutdown(context.Background())
	tr.serve(make(chan error, 1))
	// One answered request: Serve has set up HTTP/2 by then.
	resp, err := http.Get("http://" + tr.lns[0].Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if plain, secure := tr.addrs(); plain != tr.lns[0].Addr().String() || secure != "" {
		t.Errorf("addrs() = listen %q, tls %q; want listen %q, tls \"\"", plain, secure, tr.lns[0].Addr())
	}
}

// TestAdminConnectionsAreBounded: the admin listener cuts a client that
// dribbles its headers and closes an idle keep-alive connection, after the
// server section's times, as the traffic listeners do. With no idle
// timeout, idle admin connections piled up for ever.
func TestAdminConnectionsAreBounded(t *testing.T) {
	path, _ := rulesFile(t, upstream(t), "routes: [{path: /a, upstream: app}]\nserver: {readHeaderTimeout: 1s, idleTimeout: 1s}")
	inst, _ := running(t, Options{Config: path, Admin: "127.0.0.1:0", Log: io.Discard, Drain: time.Second})
	_, _, admin := inst.Addrs()
	for _, tt := range []struct {
		name, send string
	}{
		{"idle after an answer", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"},
		{"headers never finished", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", admin)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tt.send); err != nil {
				t.Fatal(err)
			}
			// Well past the 1 s the server section allows; the server closing
			// the connection ends io.ReadAll before it.
			_ = c.SetReadDeadline(time.Now().Add(8 * time.Second))
			start := time.Now()
			_, err = io.ReadAll(c)
			if err != nil {
				t.Errorf("connection still open %v after it was %s (server section: 1s): %v", time.Since(start).Round(time.Millisecond), tt.name, err)
			}
		})
	}
}

// TestAdminOptionsStarChecksHost: "OPTIONS *" went to net/http's general
// OPTIONS handler, which answered 200 for any Host, past the admin API's
// DNS-rebinding check (SPEC §11: every admin request, reads included).
func TestAdminOptionsStarChecksHost(t *testing.T) {
	path, _ := rulesFile(t, upstream(t), "routes: [{path: /a, upstream: app}]")
	inst, _ := running(t, Options{Config: path, Admin: "127.0.0.1:0", Log: io.Discard, Drain: time.Second})
	_, _, admin := inst.Addrs()
	c, err := net.Dial("tcp", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "OPTIONS * HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(got), "HTTP/1.1 403") {
		t.Errorf("OPTIONS * with Host evil.example: %.40q, want 403", got)
	}
}

// A failed accept (out of descriptors) keeps every client waiting while
// net/http retries: the operator hears of it at warn, once a second however
// often net/http retries, while a client's own trouble (a bad handshake)
// stays at debug, and is counted by why (sluice_tls_handshake_errors_total).
func TestServerLogWarnsOfFailedAccepts(t *testing.T) {
	var buf logtest.Buffer
	reg := prometheus.NewRegistry()
	l := stdlog.New(newServerLog(zerolog.New(&buf).Level(zerolog.DebugLevel), admin.NewTLSMetrics(reg, tlsedge.HandshakeReasons())), "", 0)
	for range 50 {
		l.Printf("http: Accept error: accept tcp 127.0.0.1:8080: accept4: too many open files; retrying in 5ms")
	}
	l.Printf("http: TLS handshake error from 10.0.0.1:5555: EOF")
	accepts := buf.Events("Accept error")
	if len(accepts) != 1 || accepts[0]["level"] != "warn" {
		t.Fatalf("50 failed accepts within a second logged %d events (%v), want 1 at warn", len(accepts), accepts)
	}
	if ev := buf.Find("TLS handshake error", 0); ev == nil || ev["level"] != "debug" {
		t.Fatalf("a client's failed handshake logged %v, want one event at debug", ev)
	}
	counted := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "sluice_tls_handshake_errors_total" {
				counted[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	if len(counted) != len(tlsedge.HandshakeReasons()) || counted[tlsedge.HandshakeClosed] != 1 || counted[tlsedge.HandshakeOther] != 0 {
		t.Errorf("handshake failures counted %v, want closed 1 and every other reason at 0", counted)
	}
}

// The admin listener holds at most adminMaxConnections connections: past
// them a connection waits in the kernel's queue, so a flood of idle admin
// connections takes no more descriptors from the traffic's upstreams. The
// connections it holds are served, and one that closes lets a waiting one
// in.
func TestAdminConnectionsAreCapped(t *testing.T) {
	path, _ := rulesFile(t, upstream(t), "routes: [{path: /a, upstream: app}]")
	inst, _ := running(t, Options{Config: path, Admin: "127.0.0.1:0", Log: io.Discard, Drain: time.Second})
	_, _, admin := inst.Addrs()
	healthz := func(c net.Conn, within time.Duration) bool {
		_ = c.SetDeadline(time.Now().Add(within))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			return false
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	conns := make([]net.Conn, adminMaxConnections)
	for i := range conns {
		c, err := net.Dial("tcp", admin)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	if !healthz(conns[0], 5*time.Second) {
		t.Fatal("a connection within the cap was not served")
	}
	waiting, err := net.Dial("tcp", admin) // the kernel completes the handshake; the gateway does not accept it
	if err != nil {
		t.Fatal(err)
	}
	defer waiting.Close()
	if _, err := io.WriteString(waiting, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = waiting.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _ := waiting.Read(make([]byte, 1)); n != 0 {
		t.Fatalf("connection %d past the cap of %d was served", adminMaxConnections+1, adminMaxConnections)
	}
	conns[1].Close()
	_ = waiting.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(waiting), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("once a connection closed, the waiting one got %v, %v; want 200", resp, err)
	}
}
