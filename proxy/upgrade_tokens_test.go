package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// switchingUpstream answers every request that asks to upgrade with 101 to
// what it asked, and goes on reading HTTP on the connection, as httpbin's
// /status/101 or a careless server would; its Sec-WebSocket-Accept is the
// right one under /right, a wrong one under /wrong, none elsewhere. Other
// requests get 200. It records each request's line and Upgrade field.
func switchingUpstream(t *testing.T) (string, func() []string) {
	var mu sync.Mutex
	var seen []string
	up := rawServe(t, func(r *http.Request, c net.Conn) bool {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.RequestURI+" upgrade="+r.Header.Get("Upgrade"))
		mu.Unlock()
		if u := r.Header.Get("Upgrade"); u != "" {
			accept := ""
			switch {
			case strings.HasPrefix(r.RequestURI, "/right"):
				accept = "Sec-WebSocket-Accept: " + wsAccept(r.Header.Get("Sec-WebSocket-Key")) + "\r\n"
			case strings.HasPrefix(r.RequestURI, "/wrong"):
				accept = "Sec-WebSocket-Accept: " + wsAccept("another key") + "\r\n"
			}
			_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+u+"\r\n"+accept+"\r\n")
			return true // and goes on reading HTTP
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	return up, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// A tunnel opens only to a protocol server.upgrades lists (websocket
// unless set), and for a WebSocket only when the upstream's 101 accepts
// the client's key. Before, any Upgrade token was passed on, and any 101
// opened a tunnel: the requests a client then sent on it reached an
// upstream that answered 101 and went on reading HTTP (httpbin's
// /status/101), with no route, rule or X-Forwarded-For rewriting between.
func TestOnlyListedUpgradesOpenATunnel(t *testing.T) {
	for _, c := range []struct {
		name, upgrades, path, upgrade string
		status                        int
		upstreamSaw                   string // the Upgrade field the upstream got
	}{
		{"websocket accepted", "", "/right", "websocket", 101, "websocket"},
		{"websocket without accept", "", "/none", "websocket", 502, "websocket"},
		{"websocket with a wrong accept", "", "/wrong", "WebSocket", 502, "WebSocket"},
		{"a token not listed", "", "/right", "foo", 200, ""},
		{"a listed token and one not", "", "/right", "foo, websocket", 101, "websocket"},
		{"a token listed", "upgrades: [foo, websocket]", "/none", "foo", 101, "foo"},
		{"no upgrade allowed", "upgrades: []", "/right", "websocket", 200, ""},
		{"h2c, never", "", "/right", "h2c", 200, ""},
		// a long s folds to s in Unicode, not in ASCII as tokens compare
		{"websocket spelled with a long s", "", "/none", "webſocket", 200, ""},
		{"websocket within another token", "upgrades: [not-websocket]", "/none", "not-websocket", 101, "not-websocket"},
	} {
		t.Run(c.name, func(t *testing.T) {
			up, seen := switchingUpstream(t)
			server := ""
			if c.upgrades != "" {
				server = "server:\n  " + c.upgrades + "\n"
			}
			gw := parityGateway(t, "", fmt.Sprintf("%supstreams:\n  up:\n    targets: [%q]\nroutes:\n  - path: /*\n    upstream: up\n", server, up))
			conn, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.WriteString(conn, "GET "+c.path+" HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: "+c.upgrade+
				"\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.status {
				t.Fatalf("Upgrade: %s to %s: status %d, want %d", c.upgrade, c.path, resp.StatusCode, c.status)
			}
			if b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024)); resp.StatusCode == http.StatusBadGateway && !strings.Contains(string(b), "did not accept the WebSocket handshake") {
				t.Errorf("502 body %q, want it to say the upstream did not accept the handshake", b)
			}
			if resp.StatusCode == http.StatusSwitchingProtocols {
				// On the tunnel: the upstream's own business.
				_, _ = io.WriteString(conn, "GET /through-the-tunnel HTTP/1.1\r\nHost: gw\r\n\r\n")
				if r, err := http.ReadResponse(br, nil); err != nil || r.StatusCode != 200 {
					t.Fatalf("on the tunnel: %v, %v", r, err)
				}
			}
			got := seen()
			if len(got) == 0 || got[0] != "GET "+c.path+" upgrade="+c.upstreamSaw {
				t.Errorf("the upstream saw %q, want first %q", got, "GET "+c.path+" upgrade="+c.upstreamSaw)
			}
		})
	}
}
