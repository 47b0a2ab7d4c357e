package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"sluice/internal/testcert"
)

// TestFastPathTLSUpstreamCloses: against the real binary, with an
// https:// target's certificate trusted through SSL_CERT_FILE, a target
// that reads every request and closes unanswered (with TLS's close_notify)
// sees a GET and a HEAD once each with retries: 0, as a plain target does.
// The TLS handshake's records were counted as the connection's requests,
// so a new connection passed for a reused one and each was sent twice.
func TestFastPathTLSUpstreamCloses(t *testing.T) {
	ca := testcert.NewCA(t, "upstream CA")
	dir := t.TempDir()
	leaf := ca.Server(t, time.Now().Add(time.Hour), "127.0.0.1")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", caFile) // read by the gateway process
	serverTLS := &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}

	var read atomic.Int64
	drop, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drop.Close() })
	go func() {
		for {
			c, err := drop.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close() // close_notify, then FIN
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					read.Add(1)
				}
			}()
		}
	}()

	g := startGateway(t, fmt.Sprintf(`
upstreams:
  drop: { targets: ["https://%s"], retries: 0, passive: { consecutiveFailures: 0 } }
routes:
  - { path: /drop/*, upstream: drop, forwarder: fast }
`, drop.Addr().String()))

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
