package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// The forwarder tests run under any SLUICE_FORWARDER (the gateway inherits
// the test's environment): what the client gets must be the same whichever
// path carries it. Which path was taken is read from the access log and
// checked against what auto (or the forced mode) must choose.

// fwdExpect is the forwarder the gateway must pick for a request that auto
// sends autoChoice; mustStandard marks requests the fast path never takes.
func fwdExpect(autoChoice string, mustStandard bool) string {
	switch os.Getenv("SLUICE_FORWARDER") {
	case "standard":
		return "standard"
	case "fast":
		if mustStandard {
			return "standard"
		}
		return "fast"
	}
	return autoChoice
}

// fwdRules is one route to up with the access log on.
func fwdRules(upURL string) string {
	return rulesFor(upURL, `
log:
  access: true
routes:
  - path: /*
    upstream: up
    resource: all
    forwarder: auto
`)
}

// checkForwarder asserts the access log's forwarder for path.
func checkForwarder(t *testing.T, g *gateway, path, want string) {
	t.Helper()
	var got any
	poll(t, 3*time.Second, "an access log for "+path, func() bool {
		for _, ev := range g.logs.Events("access") {
			if ev["path"] == path {
				got = ev["forwarder"]
				return true
			}
		}
		return false
	})
	if got != want {
		t.Errorf("%s went the %v path, want %s", path, got, want)
	}
}

// TestForwarderWebSocketUpgrade passes a WebSocket handshake and then raw
// bytes both ways through the gateway.
func TestForwarderWebSocketUpgrade(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "want an upgrade", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			wsAccept(r.Header.Get("Sec-WebSocket-Key")))
		brw.Flush()
		// Echo whatever arrives, upper-cased, so the answer is the server's.
		buf := make([]byte, 1024)
		for {
			n, err := brw.Read(buf)
			if err != nil {
				return
			}
			conn.Write(bytes.ToUpper(buf[:n]))
		}
	})
	g := startGateway(t, fwdRules(up.URL))
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(g.URL, "http://"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br, resp := wsHandshake(t, conn, "x")
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("handshake: %d %v", resp.StatusCode, resp.Header)
	}
	for _, msg := range []string{"hello", "second frame"} {
		if _, err := conn.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatalf("echo of %q: %v", msg, err)
		}
		if string(got) != strings.ToUpper(msg) {
			t.Errorf("echo %q, want %q", got, strings.ToUpper(msg))
		}
	}
	conn.Close()
	checkForwarder(t, g, "/ws", fwdExpect("standard", true))
	// The upgrade is the target's answer, a 101 (SPEC §9: code is the
	// answer's class, or error for a transport failure): a dashboard that
	// alerts on code="error" must not fire on WebSocket traffic.
	m := metrics(t, g)
	series := func(code string) string {
		return `sluice_upstream_requests_total{code="` + code + `",target="` + up.URL + `",upstream="up"}`
	}
	if m[series("1xx")] != 1 || m[series("error")] != 0 {
		t.Errorf("upstream requests: 1xx %v, error %v; want the upgrade counted as 1xx once", m[series("1xx")], m[series("error")])
	}
}

// TestForwarderSSEIsIncremental checks that each event reaches the client
// before the upstream sends the next one — with Accept: text/event-stream
// (auto: standard path) and without it (auto: the fast path, which streams
// an event-stream response with a flush per read).
func TestForwarderSSEIsIncremental(t *testing.T) {
	next := make(chan struct{}, 8)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(w, "data: event %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next: // the client saw event i
			case <-time.After(3 * time.Second):
				return // it never did: the stream is not incremental
			case <-r.Context().Done():
				return
			}
		}
	})
	g := startGateway(t, fwdRules(up.URL))
	for _, c := range []struct {
		path, accept, auto string
	}{
		{"/events", "text/event-stream", "standard"},
		{"/events-plain", "", "fast"},
	} {
		req, _ := http.NewRequest("GET", g.URL+c.path, nil)
		if c.accept != "" {
			req.Header.Set("Accept", c.accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		for i := 1; i <= 3; i++ {
			start := time.Now()
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: event %d: %v (after %v)", c.path, i, err, time.Since(start))
			}
			if want := fmt.Sprintf("data: event %d\n", i); line != want {
				t.Fatalf("%s: got %q, want %q", c.path, line, want)
			}
			br.ReadString('\n') // the blank line ending the event
			next <- struct{}{}
		}
		resp.Body.Close()
		checkForwarder(t, g, c.path, fwdExpect(c.auto, false))
	}
}

// TestForwarderLargeBodies uploads a 1 MiB body (auto: standard, streamed)
// and downloads a 4 MiB one of unknown length (the fast path streams it);
// both arrive whole.
func TestForwarderLargeBodies(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			h := sha256.New()
			n, _ := io.Copy(h, r.Body)
			fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		for off := 0; off < len(big); off += 256 << 10 {
			w.Write(big[off : off+256<<10])
			w.(http.Flusher).Flush() // no Content-Length: chunked
		}
	})
	g := startGateway(t, fwdRules(up.URL))

	upload := big[:1<<20]
	resp, err := http.Post(g.URL+"/upload", "application/octet-stream", bytes.NewReader(upload))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("%d %x", len(upload), sha256.Sum256(upload)); string(b) != want {
		t.Errorf("upload: upstream got %q, want %q", b, want)
	}
	checkForwarder(t, g, "/upload", fwdExpect("standard", false))

	resp, err = http.Get(g.URL + "/download")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, big) {
		t.Errorf("download: %d bytes (err %v), want %d identical bytes", len(got), err, len(big))
	}
	if resp.ContentLength != -1 {
		t.Errorf("download: Content-Length %d, want none (streamed)", resp.ContentLength)
	}
	checkForwarder(t, g, "/download", fwdExpect("fast", false))
}

// TestForwarderTrailers delivers response trailers, announced and not, to
// a client that asks for them (TE: trailers; auto: standard) and to one
// that does not (auto: fast).
func TestForwarderTrailers(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		io.WriteString(w, "body ")
		w.(http.Flusher).Flush()
		io.WriteString(w, "end")
		w.Header().Set("X-Checksum", "c0ffee")
		w.Header().Set(http.TrailerPrefix+"X-Unannounced", "late")
	})
	g := startGateway(t, fwdRules(up.URL))
	for _, c := range []struct{ path, te, auto string }{
		{"/grpc-like", "trailers", "standard"},
		{"/plain", "", "fast"},
	} {
		req, _ := http.NewRequest("GET", g.URL+c.path, nil)
		if c.te != "" {
			req.Header.Set("TE", c.te)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "body end" {
			t.Errorf("%s: body %q", c.path, b)
		}
		if resp.Trailer.Get("X-Checksum") != "c0ffee" || resp.Trailer.Get("X-Unannounced") != "late" {
			t.Errorf("%s: trailers %v, want X-Checksum and X-Unannounced", c.path, resp.Trailer)
		}
		checkForwarder(t, g, c.path, fwdExpect(c.auto, false))
	}
}

// wsHandshake sends the RFC 6455 sample WebSocket upgrade for /ws on conn
// (5 s deadline) and reads the answer; br then reads the frames that follow.
func wsHandshake(t *testing.T, conn net.Conn, host string) (*bufio.Reader, *http.Response) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", host)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return br, resp
}
