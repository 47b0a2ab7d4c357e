package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sluice/internal/heldconn"
	"sluice/internal/testcert"
)

// TestFastPathTLSUpstreamCloses: against the real binary, with an
// https:// target's certificate trusted through SSL_CERT_FILE, a target
// that reads every request and closes unanswered (with TLS's close_notify)
// sees a GET and a HEAD once each with retries: 0, as a plain target does.
// The TLS handshake's records were counted as the connection's requests,
// so a new connection passed for a reused one and each was sent twice.
func TestFastPathTLSUpstreamCloses(t *testing.T) {
	var read atomic.Int64
	drop := tlsUpstream(t, func(c *tls.Conn) {
		// Then close_notify and FIN, as the connection closes.
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			read.Add(1)
		}
	})

	g := startGateway(t, fmt.Sprintf(`
upstreams:
  drop: { targets: [%q], retries: 0, passive: { consecutiveFailures: 0 } }
routes:
  - { path: /drop/*, upstream: drop, forwarder: fast }
`, drop))

	for i, method := range []string{"GET", "HEAD"} {
		req, _ := http.NewRequest(method, g.URL+"/drop/x", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 502 {
			t.Errorf("%s to a target that drops it: %d, want 502", method, resp.StatusCode)
		}
		time.Sleep(200 * time.Millisecond) // a second send would have come by now
		if n := read.Load(); n != int64(i+1) {
			t.Errorf("after the %s the target read %d requests, want %d: each sent once", method, n, i+1)
		}
	}

}

// tlsUpstream is an https:// target on 127.0.0.1 whose certificate the
// gateway trusts through SSL_CERT_FILE; serve handles each connection.
func tlsUpstream(t *testing.T, serve func(c *tls.Conn)) string {
	t.Helper()
	ca := testcert.NewCA(t, "upstream CA")
	leaf := ca.Server(t, time.Now().Add(time.Hour), "127.0.0.1")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", caFile) // read by the gateway process
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tls.NewListener(heldconn.Listener{Listener: raw}, &tls.Config{Certificates: []tls.Certificate{leaf.TLS}})
	serveConns(t, ln, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		serve(c.(*tls.Conn))
	})
	return "https://" + ln.Addr().String()
}

// TestFastPathTLSStrayBytesNotServedToNextClient: over an https:// target
// as over a plain one (proxy's TestStrayUpstreamBytesNotServedToNextClient),
// a body an upstream sends on a HEAD answer (a Python app's do_HEAD =
// do_GET) stays on the pooled connection, and the next request, another
// client's, must not read it as its answer, even when that body is a whole
// answer. The fast path saw only TLS records on the connection, never the
// HEAD, and served the body; then, with the body in a record of its own
// that came in the same segment as the head's, the socket peek found the
// socket empty (the gateway's TLS had read both records) and the next
// client got the upstream's forged answer.
func TestFastPathTLSStrayBytesNotServedToNextClient(t *testing.T) {
	const forged = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"
	for _, c := range []struct {
		name string
		same bool // the body's record in the head's segment; else a write 20 ms later
	}{
		{"a later write", false},
		{"in the same segment", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := tlsUpstream(t, func(tc *tls.Conn) {
				br := bufio.NewReader(tc)
				raw := tc.NetConn().(*heldconn.Conn)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if r.Method != "HEAD" {
						io.WriteString(tc, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal")
						continue
					}
					if c.same {
						raw.Hold()
					}
					fmt.Fprintf(tc, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(forged))
					if c.same {
						io.WriteString(tc, forged) // a record of its own
						raw.Send()
						continue
					}
					time.Sleep(20 * time.Millisecond)
					io.WriteString(tc, forged)
				}
			})
			g := startGateway(t, fmt.Sprintf(`
upstreams:
  up: { targets: [%q], retries: 0 }
routes:
  - { path: /*, upstream: up, forwarder: fast }
`, up))
			req, _ := http.NewRequest("HEAD", g.URL+"/a", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			time.Sleep(200 * time.Millisecond) // the stray bytes are in before the next request
			resp, err = http.Get(g.URL + "/b")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "real" {
				t.Errorf("the next client got %d %q, want the upstream's 200 \"real\"", resp.StatusCode, b)
			}
		})
	}
}

// TestFastPathTLSPostAfterShortKeepAlive: over an https:// target as over a
// plain one (proxy's TestPostAfterShortKeepAlive), an upstream whose
// keep-alive (200 ms) is below the fast path's 1 s idle probe closes each
// pooled connection before the next POST, 600 ms later. The fast path
// learns the short keep-alive from the first close met under a request
// and loses that POST only; over TLS it learned nothing (the close_notify
// it wrote back as it closed the connection hid how long the connection
// had been idle) and every other POST was a 502.
func TestFastPathTLSPostAfterShortKeepAlive(t *testing.T) {
	up := tlsUpstream(t, func(c *tls.Conn) {
		br := bufio.NewReader(c)
		for {
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond)) // the keep-alive
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.Copy(io.Discard, r.Body)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	g := startGateway(t, fmt.Sprintf(`
upstreams:
  up: { targets: [%q], retries: 0, passive: { consecutiveFailures: 0 } }
routes:
  - { path: /*, upstream: up, forwarder: fast }
`, up))
	var got []int
	failed := 0
	for i := range 7 {
		if i > 0 {
			time.Sleep(600 * time.Millisecond)
		}
		resp, err := http.Post(g.URL+"/x", "text/plain", strings.NewReader("abc"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got = append(got, resp.StatusCode)
		if resp.StatusCode != 200 {
			failed++
		}
	}
	if failed > 1 {
		t.Errorf("%d of 7 POSTs failed after the upstream closed the idle connection (%v), want at most 1", failed, got)
	}
}
