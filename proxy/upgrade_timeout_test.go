package proxy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestUpgradeOutlivesTheRouteTimeout: the route timeout (300 ms here)
// bounds an upgrade's handshake, not the tunnel after it. Messages keep
// flowing through a WebSocket for three times the timeout, under every
// forwarder (upgrades always take the standard path); an upstream that
// never answers the handshake is still 504 at the timeout. Before, every
// WebSocket was cut when the route timeout ran out, messages flowing or not.
func TestUpgradeOutlivesTheRouteTimeout(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/silent" {
			<-r.Context().Done()
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
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
		addr := strings.TrimPrefix(gw, "http://")
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 101 {
			t.Fatalf("%s: handshake %v %v, want 101", fwd, resp, err)
		}
		for i := range 4 {
			msg := fmt.Sprintf("message %d", i)
			io.WriteString(c, msg)
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != strings.ToUpper(msg) {
				t.Fatalf("%s: %q after %v: %q %v, want its echo: the tunnel was cut", fwd, msg, time.Duration(i)*300*time.Millisecond, got, err)
			}
			time.Sleep(300 * time.Millisecond)
		}
		c.Close()

		start := time.Now()
		c, err = net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET /silent HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		resp, err = http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 504 {
			t.Fatalf("%s: a handshake never answered: %v %v, want 504", fwd, resp, err)
		}
		if waited := time.Since(start); waited < 250*time.Millisecond || waited > 5*time.Second {
			t.Errorf("%s: the unanswered handshake got its 504 after %v, want about the 300ms timeout", fwd, waited)
		}
		c.Close()
	}
}
