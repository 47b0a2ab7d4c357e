package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// hdReadRequest consumes one request's head from an upstream connection.
func hdReadRequest(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil || line == "\r\n" {
			return
		}
	}
}

// hdReset closes c with an RST instead of a FIN.
func hdReset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// TestUpstreamFaults: every way an upstream can fail gets 502 or 504 with a
// JSON body (or, once the status is sent, a visibly truncated response), is
// counted as an error, releases its concurrency, and leaves the gateway up.
func TestUpstreamFaults(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	ups := map[string]string{
		// Port 1 (tcpmux), where nothing listens: a port freed by freeAddr
		// may be handed next to the gateway's own listener (it binds
		// 127.0.0.1:0), and the route then forwards into itself, a loop
		// that answers 504 and never drains (seen once in CI).
		"down": "http://127.0.0.1:1",
		"hangup": hdRawUpstream(t, func(c net.Conn) {
			hdReadRequest(c) // then close without a word
		}),
		"reset": hdRawUpstream(t, func(c net.Conn) {
			hdReadRequest(c)
			hdReset(c)
		}),
		"hang": hdRawUpstream(t, func(c net.Conn) {
			hdReadRequest(c)
			select {
			case <-hang:
			case <-time.After(10 * time.Second):
			}
		}),
		"garbage": hdRawUpstream(t, func(c net.Conn) {
			hdReadRequest(c)
			io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n\x00\x01\x02 not http at all\r\n\r\n")
		}),
		"badstatus": hdRawUpstream(t, func(c net.Conn) {
			hdReadRequest(c)
			io.WriteString(c, "HTTP/1.1 2000 Whatever\r\nContent-Length: 0\r\n\r\n")
		}),
		"cutlength": hdRawUpstream(t, func(c net.Conn) {
			hdReadRequest(c)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("x", 1000))
			time.Sleep(20 * time.Millisecond)
			hdReset(c)
		}),
		"cutchunked": hdRawUpstream(t, func(c net.Conn) {
			hdReadRequest(c)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
			time.Sleep(20 * time.Millisecond)
			hdReset(c)
		}),
	}
	status500 := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", 500)
	})
	ups["fivehundred"] = status500.URL
	var rules strings.Builder
	rules.WriteString("upstreams:\n")
	for name, u := range ups {
		fmt.Fprintf(&rules, "  %s:\n    targets: [%q]\n    timeout: 500ms\n", name, u)
	}
	rules.WriteString("routes:\n")
	for name := range ups {
		fmt.Fprintf(&rules, "  - path: /%s\n    upstream: %s\n    resource: %s\n", name, name, name)
	}
	g := startGateway(t, rules.String())

	cases := []struct {
		name   string
		status int
		body   string // "" for a cut response: the client must see it truncated
	}{
		{"down", 502, "upstream unreachable"},
		{"hangup", 502, "upstream unreachable"},
		{"reset", 502, "upstream unreachable"},
		{"hang", 504, "upstream timeout"},
		{"garbage", 502, "upstream unreachable"},
		{"badstatus", 502, "upstream unreachable"},
		{"cutlength", 200, ""},
		{"cutchunked", 200, ""},
		{"fivehundred", 500, "boom"},
	}
	const tries = 3
	// A new connection per request: an aborted response closes its
	// connection, and a client must not retry on a reused one.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for range tries {
				start := time.Now()
				resp, err := client.Get(g.URL + "/" + c.name)
				if err != nil && c.body == "" {
					// Cut before the gateway flushed the status: the
					// connection closes with no response, also a failure
					// the client sees.
					continue
				}
				if err != nil {
					t.Fatalf("no response: %v", err)
				}
				b, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.status {
					t.Errorf("status %d %q, want %d", resp.StatusCode, b, c.status)
				}
				if c.body == "" {
					if rerr == nil {
						t.Errorf("a response cut upstream reached the client complete-looking (%d bytes, no error)", len(b))
					}
				} else if !strings.Contains(string(b), c.body) {
					t.Errorf("body %q, want it to contain %q", b, c.body)
				}
				if took := time.Since(start); took > 3*time.Second {
					t.Errorf("took %v; the route timeout is 500ms", took)
				}
			}
		})
	}
	for _, c := range cases {
		hdWaitConcurrencyZero(t, g, c.name)
		if n := hdErrors(t, g, c.name); n != tries {
			t.Errorf("%s: sluice_requests_total{result=\"error\"} = %v, want %d", c.name, n, tries)
		}
	}
	hdHealthy(t, g)
}
