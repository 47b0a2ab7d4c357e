package lifecycle

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A client that declares a body on the admin listener and sends a few bytes
// of it is cut once readHeaderTimeout has passed since its headers, whether
// the handler reads the body (a rules edit, also without the token) or
// leaves it for net/http to drain (/healthz): before, each such connection
// stayed open and unanswered for as long as its client liked, and 256 of
// them took every admin connection. A request with no body gets no read
// deadline: a CPU profile longer than readHeaderTimeout, or sendTimeout,
// runs its length. One that does not take its answer is cut after
// sendTimeout.
func TestAdminCutsAClientThatWithholdsItsBody(t *testing.T) {
	const big = 7 << 20
	path, _ := rulesFile(t, upstream(t), "routes: [{path: /a, upstream: app}]\nserver: {readHeaderTimeout: 1s, idleTimeout: 60s, sendTimeout: 1s}\n#"+strings.Repeat("x", big))
	inst, _ := running(t, Options{Config: path, Admin: "127.0.0.1:0", Log: io.Discard, Drain: time.Second})
	_, _, addr := inst.Addrs()
	heads := []string{
		"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\nabc",
		"PUT /api/rules/flowRules/0 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"co",
		"POST /api/reload HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc",
		"GET /healthz HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 100000\r\n\r\nabc", // refused by Host, drained all the same
	}
	var wg sync.WaitGroup
	for _, head := range heads { // at once: each is cut on its own clock
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			if _, err := io.WriteString(c, head); err != nil {
				t.Error(err)
				return
			}
			start := time.Now()
			_ = c.SetReadDeadline(start.Add(15 * time.Second))
			_, err = io.ReadAll(c) // whatever is answered, up to the close
			if took := time.Since(start); err != nil || took > 10*time.Second {
				t.Errorf("%.40q: the connection was held %v (%v), want it closed about 1 s (readHeaderTimeout) after the headers", head, took.Round(time.Millisecond), err)
			}
		})
	}
	wg.Wait()

	start := time.Now()
	resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=2")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != 200 || took < 2*time.Second {
		t.Errorf("a 2 s profile under readHeaderTimeout 1s: %d after %v, want 200 after 2 s", resp.StatusCode, took)
	}
	// A client that does not take its answer is cut after sendTimeout: a
	// 7 MB rules file read by GET /api/rules/raw, into a receive buffer of
	// 4 KB that is never read.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /api/rules/raw HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	time.Sleep(2 * time.Second) // sendTimeout 1s, and then some
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	n, err := io.Copy(io.Discard, c)
	if err != nil || n >= big {
		t.Errorf("a client that took none of a %d-byte answer for 2 s then read %d bytes (%v), want the connection cut after sendTimeout (1 s)", big, n, err)
	}
}
