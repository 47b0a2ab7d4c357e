package e2e

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

// The hardening tests throw bad requests, hostile clients and broken
// upstreams at the real binary: it must answer each with a sensible status,
// keep serving, release what the request held, and never buffer a body whole.

// hdRules serves every test route from one echo upstream.
func hdRules(upURL, extra string) string {
	return fmt.Sprintf(`upstreams:
  up:
    targets: [%q]
    timeout: 5s
routes:
  - path: /echo/*
    upstream: up
    resource: echo
  - path: /stream/*
    upstream: up
    resource: stream
  - path: /q
    upstream: up
    resource: q
paramRules:
  - resource: q
    param: query:id
    count: 1000000
flowRules:
  - resource: stream
    grade: concurrency
    count: 1
%s`, upURL, extra)
}

// TestHardeningHugeHeaders: headers past the limit get 431 before any
// handler runs; large but allowed headers pass.
func TestHardeningHugeHeaders(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, hdEchoHandler)
	g := startGateway(t, hdRules(up.URL, ""))
	addr := hdAddr(g.URL)
	for _, c := range []struct {
		name string
		size int
		want int
	}{
		{"32 KiB passes", 32 << 10, 200},
		{"100 KiB is 431", 100 << 10, 431},
		{"1 MiB is 431", 1 << 20, 431},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := "GET /echo/h HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", c.size) + "\r\n\r\n"
			resp, _, err := hdRaw(t, addr, req)
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			if resp.StatusCode != c.want {
				t.Errorf("status %d, want %d", resp.StatusCode, c.want)
			}
		})
	}
	// Ten thousand small headers are the same as one big one.
	var b strings.Builder
	b.WriteString("GET /echo/h HTTP/1.1\r\nHost: x\r\n")
	for i := range 10000 {
		fmt.Fprintf(&b, "X-H%d: v\r\n", i)
	}
	b.WriteString("\r\n")
	if resp, _, err := hdRaw(t, addr, b.String()); err != nil || resp.StatusCode != 431 {
		t.Errorf("10,000 headers: %v %v, want 431", resp, err)
	}
	if n, _ := up.stats(); n != 1 {
		t.Errorf("upstream saw %d requests, want 1 (only the allowed one)", n)
	}
	hdHealthy(t, g)
}

// TestHardeningHugeBodiesStream: a 200 MB upload and a 200 MB download pass
// through while the gateway's peak RSS stays far below the body size.
func TestHardeningHugeBodiesStream(t *testing.T) {
	// Not parallel: each 200 MB body must cross within the upstream's 5 s
	// timeout, which tests beside it on 2 cores made it miss.
	const size = 200 << 20
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			n, err := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%d %v", n, err)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(size))
		buf := make([]byte, 64<<10)
		for sent := 0; sent < size; sent += len(buf) {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	})
	g := startGateway(t, hdRules(up.URL, ""))
	pid := g.cmd.Process.Pid
	before := hdProcStatus(t, pid, "VmRSS")

	// Chunked (no Content-Length) and with a length: both stream.
	for _, chunked := range []bool{true, false} {
		var body io.Reader = io.LimitReader(zeros{}, size)
		req, _ := http.NewRequest("POST", g.URL+"/echo/upload", body)
		if !chunked {
			req.ContentLength = size
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("upload (chunked %v): %v", chunked, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != fmt.Sprintf("%d <nil>", size) {
			t.Errorf("upload (chunked %v): %d %q, want 200 and all %d bytes at the upstream", chunked, resp.StatusCode, b, size)
		}
	}
	resp, err := http.Get(g.URL + "/echo/download")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || n != size || err != nil {
		t.Errorf("download: %d, %d bytes, %v; want 200 and %d bytes", resp.StatusCode, n, err, size)
	}
	peak := hdProcStatus(t, pid, "VmHWM")
	after := hdProcStatus(t, pid, "VmRSS")
	t.Logf("gateway RSS before %d kB, after %d kB, peak %d kB, for 3 x %d MB bodies", before, after, peak, size>>20)
	// Buffering one body whole would need 200 MB.
	if peak > 64<<10 {
		t.Errorf("gateway peak RSS %d kB: bodies are not streamed", peak)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestHardeningMalformedRequests: bad request lines, paths and encodings get
// a 4xx (from net/http or the router), never a crash; good-but-odd encodings
// reach the upstream exactly as sent.
func TestHardeningMalformedRequests(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, hdEchoHandler)
	g := startGateway(t, hdRules(up.URL, ""))
	addr := hdAddr(g.URL)
	bad := []struct {
		name, req string
		want      int // 0: any 4xx
	}{
		{"bad percent-escape", "GET /echo/%zz HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"truncated escape", "GET /echo/% HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"no leading slash", "GET echo/a HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"space in path", "GET /echo/a b HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"control byte", "GET /echo/a\x01b HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"unknown version", "GET /echo/a HTTP/9.9\r\nHost: x\r\n\r\n", 505},
		{"TLS to the plain port", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 0},
		{"missing Host in 1.1", "GET /echo/a HTTP/1.1\r\n\r\n", 0},
		{"two Hosts", "GET /echo/a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 0},
		{"bad header name", "GET /echo/a HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", 0},
		{"negative Content-Length", "POST /echo/a HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 0},
		{"two Content-Lengths", "POST /echo/a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 0},
		{"unknown Transfer-Encoding", "POST /echo/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		// Targets that the gateway and its upstream could read two ways
		// (docs/configuration.md#one-view-of-a-request): a fragment, and queries
		// Go's url.ParseQuery drops parameters of.
		{"fragment", "GET /q?id=1#x HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"bad escape in query", "GET /echo/a?x=%zz&y=1 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"semicolon in query", "GET /echo/a?x=1;y=2&z=3 HTTP/1.1\r\nHost: x\r\n\r\n", 400},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			resp, _, err := hdRaw(t, addr, c.req)
			if err != nil {
				// net/http may hang up on garbage; that is an answer too.
				t.Logf("connection closed without a response: %v", err)
				return
			}
			if c.want != 0 && resp.StatusCode != c.want || c.want == 0 && (resp.StatusCode < 400 || resp.StatusCode >= 500) {
				t.Errorf("status %d, want %v (0: a 4xx)", resp.StatusCode, c.want)
			}
		})
	}
	if n, _ := up.stats(); n != 0 {
		t.Errorf("upstream saw %d malformed requests", n)
	}

	// Content-Length with chunked: chunked wins (RFC 9112 6.3) and the
	// upstream gets one unambiguous framing, so nothing can be smuggled
	// behind the body.
	resp, body, err := hdRaw(t, addr, "POST /echo/a HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"0\r\n\r\nGET /q HTTP/1.1\r\nHost: x\r\n\r\n")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CL+TE: %v %v", resp, err)
	}
	if e := hdDecodeEcho(t, body); e.BodyBytes != 0 || e.Path != "/echo/a" {
		t.Errorf("CL+TE: upstream saw %s with %d body bytes, want /echo/a with 0", e.Path, e.BodyBytes)
	}

	// Valid but unusual: forwarded byte for byte, or as normalized.
	odd := []struct{ name, uri, wantURI string }{
		{"encoded slash kept", "/echo/a%2Fb", "/echo/a%2Fb"},
		{"encoded space", "/echo/a%20b", "/echo/a%20b"},
		{"utf-8", "/echo/%E2%9C%93", "/echo/%E2%9C%93"},
		{"encoded null", "/echo/a%00b", "/echo/a%00b"},
		// The normalized path (server.mergeSlashes is on by default).
		{"double slash merged", "/echo//a", "/echo/a"},
		{"unreserved escape decoded", "/echo/%61%7e", "/echo/a~"},
	}
	for _, c := range odd {
		t.Run(c.name, func(t *testing.T) {
			resp, body, err := hdRaw(t, addr, "GET "+c.uri+" HTTP/1.1\r\nHost: x\r\n\r\n")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v %v, want 200", resp, err)
			}
			if e := hdDecodeEcho(t, body); e.RequestURI != c.wantURI {
				t.Errorf("upstream saw %q, want %q", e.RequestURI, c.wantURI)
			}
		})
	}
	hdHealthy(t, g)
}

// TestHardeningDotSegmentsCannotSwitchRoutes: a path whose dot segments
// ("..", "%2e%2e") lead out of the route it matched must not reach the
// upstream un-normalised, or a client could be limited by one route's
// rules while an upstream that cleans paths serves another route's resource.
// Accepted answers: 400, or the upstream sees a path with no dot segments.
func TestHardeningDotSegmentsCannotSwitchRoutes(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, hdEchoHandler)
	g := startGateway(t, hdRules(up.URL, ""))
	addr := hdAddr(g.URL)
	for _, uri := range []string{"/echo/../q", "/echo/%2e%2e/q", "/echo/./../q", "/echo/..%2fq"} {
		t.Run(uri, func(t *testing.T) {
			resp, body, err := hdRaw(t, addr, "GET "+uri+" HTTP/1.1\r\nHost: x\r\n\r\n")
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			if resp.StatusCode == 400 || resp.StatusCode == 404 {
				return
			}
			e := hdDecodeEcho(t, body)
			seg := strings.ToLower(e.RequestURI)
			if strings.Contains(seg, "/../") || strings.Contains(seg, "/./") || strings.Contains(seg, "%2e%2e") ||
				strings.Contains(seg, "..%2f") {
				t.Errorf("GET %s was routed as %q and forwarded as %q: dot segments reach the upstream", uri, "/echo/*", e.RequestURI)
			}
		})
	}
}

// TestHardeningTenThousandQueryParams: a query with 10,000 parameters
// (under the header limit) is forwarded whole, and a query-sourced hot
// parameter is found at its end.
func TestHardeningTenThousandQueryParams(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, hdEchoHandler)
	g := startGateway(t, hdRules(up.URL, ""))
	var b strings.Builder
	for i := range 9999 {
		fmt.Fprintf(&b, "%c=%d&", 'a'+i%26, i%10)
	}
	b.WriteString("id=last")
	resp, body := get(t, g.URL+"/q?"+b.String())
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if e := hdDecodeEcho(t, body); e.Params != 10000 {
		t.Errorf("upstream saw %d parameters, want 10000", e.Params)
	}
	// Far more than fits in the header limit: 431, not a crash.
	resp, _, err := hdRaw(t, hdAddr(g.URL), "GET /q?"+strings.Repeat("a=1&", 50000)+" HTTP/1.1\r\nHost: x\r\n\r\n")
	if err != nil || resp.StatusCode != 431 {
		t.Errorf("200 KB query: %v %v, want 431", resp, err)
	}
	hdHealthy(t, g)
}

// TestHardeningSlowloris: a client that dribbles its headers is cut at the
// read-header timeout, while other clients are served meanwhile.
func TestHardeningSlowloris(t *testing.T) {
	up := startUpstream(t, hdEchoHandler)
	g := startGateway(t, hdRules(up.URL, ""), "-read-header-timeout", "1s")
	const clients = 20
	cut := make(chan time.Duration, clients)
	start := time.Now()
	for range clients {
		go func() {
			c, err := net.Dial("tcp", hdAddr(g.URL))
			if err != nil {
				cut <- -1
				return
			}
			defer c.Close()
			io.WriteString(c, "GET /echo/slow HTTP/1.1\r\nHost: x\r\n")
			// One header line every 200 ms would take 20 s to finish.
			for i := 0; i < 100; i++ {
				if _, err := fmt.Fprintf(c, "X-Slow-%d: v\r\n", i); err != nil {
					break
				}
				_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				if _, err := c.Read(make([]byte, 1)); err != nil {
					if ne, ok := err.(net.Error); ok && ne.Timeout() {
						continue
					}
					break // closed by the gateway (EOF or reset)
				}
				break // the gateway answered something (408/400) and will close
			}
			cut <- time.Since(start)
		}()
	}
	// Meanwhile the gateway serves (300 ms into the slowloris: the
	// subject is time passing with the slow clients connected).
	time.Sleep(300 * time.Millisecond)
	if resp, _ := get(t, g.URL+"/echo/fast"); resp.StatusCode != 200 {
		t.Errorf("a normal request during the slowloris: %d", resp.StatusCode)
	}
	for range clients {
		d := <-cut
		if d < 0 || d > 5*time.Second {
			t.Errorf("slow client cut after %v, want about the 1 s read-header timeout", d)
		}
	}
	if n, _ := up.stats(); n != 1 {
		t.Errorf("upstream saw %d requests, want only the normal one", n)
	}
	hdHealthy(t, g)
}

// TestHardeningClientsDisconnect: clients that hang up while sending the body
// or while reading the response leave nothing held: the upstream call is
// cancelled, the resource's concurrency returns to 0 and a concurrency-1 rule
// lets the next request through.
func TestHardeningClientsDisconnect(t *testing.T) {
	var upMu sync.Mutex
	upErrs := 0
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				upMu.Lock()
				upErrs++
				upMu.Unlock()
			}
			return
		}
		if r.URL.Path == "/stream/long" {
			f := http.NewResponseController(w)
			chunk := make([]byte, 32<<10)
			for i := 0; i < 200; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				_ = f.Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
			return
		}
		io.WriteString(w, "ok")
	})
	g := startGateway(t, hdRules(up.URL, ""))
	addr := hdAddr(g.URL)

	// Mid-request: 10 MB announced, 1 MB sent, then gone.
	for range 5 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /stream/upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 10<<20)
		c.Write(make([]byte, 1<<20))
		time.Sleep(50 * time.Millisecond)
		c.Close()
		hdWaitConcurrencyZero(t, g, "stream")
	}
	// Mid-response: read the first bytes of a 6 MB stream, then gone.
	for range 5 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /stream/long HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Errorf("stream: %q %v", line, err)
		}
		c.Close()
		hdWaitConcurrencyZero(t, g, "stream")
	}
	hdWaitConcurrencyZero(t, g, "stream")
	poll(t, 5*time.Second, "upstream calls cancelled", func() bool {
		up.mu.Lock()
		defer up.mu.Unlock()
		return up.inFlight == 0
	})
	// The concurrency-1 rule has its slot back.
	if resp, body := get(t, g.URL+"/stream/after"); resp.StatusCode != 200 || body != "ok" {
		t.Errorf("after the disconnects: %d %q, want 200 ok (a leaked slot would give 429)", resp.StatusCode, body)
	}
	upMu.Lock()
	t.Logf("upstream saw %d truncated uploads", upErrs)
	upMu.Unlock()
	hdHealthy(t, g)
}

// TestHardeningClientBodyErrorsAreNotUpstreamErrors: a client that sends a
// broken chunked body, or hangs up mid-upload, is the client's fault: it gets
// 400 (or nothing), and neither the error statistics nor an errorCount
// circuit breaker blame the upstream, so one bad client cannot open the
// breaker for everyone.
func TestHardeningClientBodyErrorsAreNotUpstreamErrors(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	g := startGateway(t, hdRules(up.URL, `degradeRules:
  - resource: echo
    strategy: errorCount
    threshold: 3
    minRequestAmount: 1
    statIntervalMs: 60000
    retryTimeoutMs: 60000
`))
	addr := hdAddr(g.URL)
	for range 5 {
		resp, _, err := hdRaw(t, addr, "POST /echo/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
		if err == nil && resp.StatusCode != 400 {
			t.Errorf("broken chunked body: %d, want 400", resp.StatusCode)
		}
	}
	for range 5 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /echo/upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 1<<20)
		c.Write(make([]byte, 64<<10))
		time.Sleep(30 * time.Millisecond)
		c.Close()
	}
	hdWaitConcurrencyZero(t, g, "echo")
	if n := hdErrors(t, g, "echo"); n != 0 {
		t.Errorf("sluice_requests_total{result=\"error\"} = %v after client-side body failures, want 0", n)
	}
	if resp, body := get(t, g.URL+"/echo/ok"); resp.StatusCode != 200 {
		t.Errorf("a good request after bad clients: %d %q (X-Sluice-Blocked %q): the breaker blamed the upstream",
			resp.StatusCode, body, resp.Header.Get("X-Sluice-Blocked"))
	}
}

// TestHardeningProtocolCorners: HTTP/1.0, Expect: 100-continue (also on a
// blocked request, whose body is never asked for), WebSocket upgrade.
func TestHardeningProtocolCorners(t *testing.T) {
	// Not parallel: the 100-continue corners race the gateway's answers
	// against the client's writes.
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "websocket" {
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
			// Echo frames back as opaque bytes until the client closes.
			buf := make([]byte, 1024)
			for {
				n, err := brw.Read(buf)
				if err != nil {
					return
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}
		hdEchoHandler(w, r)
	})
	g := startGateway(t, hdRules(up.URL, `  - resource: q
    count: 1
    statIntervalMs: 60000
`))
	addr := hdAddr(g.URL)

	t.Run("HTTP/1.0", func(t *testing.T) {
		// Without a Host it names no host a limit could key on: 400
		// (Envoy refuses HTTP/1.0 altogether by default).
		if resp, _, err := hdRaw(t, addr, "GET /echo/old HTTP/1.0\r\n\r\n"); err != nil || resp.StatusCode != 400 {
			t.Fatalf("HTTP/1.0 without Host: %v %v, want 400", resp, err)
		}
		for _, req := range []string{
			"GET /echo/old HTTP/1.0\r\nHost: x\r\n\r\n",
		} {
			resp, body, err := hdRaw(t, addr, req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%q: %v %v", req, resp, err)
			}
			if resp.ProtoMinor != 0 || !resp.Close {
				t.Errorf("answered %s close=%v, want HTTP/1.0 and the connection closed", resp.Proto, resp.Close)
			}
			if e := hdDecodeEcho(t, body); e.Path != "/echo/old" {
				t.Errorf("upstream saw %+v", e)
			}
		}
	})

	t.Run("Expect 100-continue", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "POST /echo/expect HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
			t.Fatalf("first line %q %v, want 100 Continue", line, err)
		}
		for l, _ := br.ReadString('\n'); l != "\r\n" && l != ""; l, _ = br.ReadString('\n') {
		}
		io.WriteString(c, "hello")
		// The upstream's own 100 Continue may follow the gateway's: a client
		// must take any number of 1xx before the final answer (RFC 9110
		// 15.2).
		resp, err := http.ReadResponse(br, nil)
		for err == nil && resp.StatusCode == 100 {
			resp, err = http.ReadResponse(br, nil)
		}
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("final response %v %v", resp, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if e := hdDecodeEcho(t, string(b)); e.BodyBytes != 5 {
			t.Errorf("upstream got %d body bytes, want 5", e.BodyBytes)
		}
	})

	t.Run("Expect 100-continue blocked", func(t *testing.T) {
		get(t, g.URL+"/q") // uses up the count-1 window
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "POST /q HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1000000\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 429 {
			t.Fatalf("%v %v, want 429 without asking for the body", resp, err)
		}
	})

	t.Run("WebSocket", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET /echo/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "websocket" {
			t.Fatalf("%v %v, want 101 Upgrade: websocket", resp, err)
		}
		for _, msg := range []string{"ping", "second frame"} {
			io.WriteString(c, msg)
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
				t.Errorf("echo %q: %q %v", msg, got, err)
			}
		}
	})
	hdHealthy(t, g)
}

// TestHardeningForwardingHeaders: hop-by-hop headers (fixed ones and those
// named in Connection) are removed both ways; X-Forwarded-For/Proto/Host
// describe the client as the gateway saw it, and a client's own Forwarded
// or X-Forwarded-* claims are dropped when it is not a trusted proxy.
func TestHardeningForwardingHeaders(t *testing.T) {
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			t.Setenv("SLUICE_FORWARDER", fwd)
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Connection", "X-Up-Secret")
				w.Header().Set("X-Up-Secret", "1")
				w.Header().Set("Keep-Alive", "timeout=5")
				w.Header().Set("Proxy-Authenticate", "Basic")
				hdEchoHandler(w, r)
			})
			g := startGateway(t, hdRules(up.URL, ""))
			resp, body, err := hdRaw(t, hdAddr(g.URL), "GET /echo/h HTTP/1.1\r\nHost: public.example:8443\r\n"+
				"Connection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: 300\r\nProxy-Authorization: Basic eA==\r\n"+
				"Proxy-Connection: keep-alive\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil.example\r\n"+
				"X-Forwarded-Proto: https\r\nForwarded: for=6.6.6.6\r\nX-Forwarded-Port: 1\r\nX-Forwarded-Prefix: /admin\r\n"+
				"X_Forwarded_Ssl: on\r\nX-Kept: yes\r\n\r\n")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v %v", resp, err)
			}
			e := hdDecodeEcho(t, body)
			h := http.Header(e.Header)
			for _, name := range []string{"X-Secret", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Forwarded",
				"X-Forwarded-Port", "X-Forwarded-Prefix", "X_forwarded_ssl"} {
				if v, ok := h[name]; ok {
					t.Errorf("upstream got hop-by-hop/untrusted %s: %q", name, v)
				}
			}
			if c := h.Get("Connection"); strings.Contains(strings.ToLower(c), "x-secret") {
				t.Errorf("upstream got Connection %q", c)
			}
			want := map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http",
				"X-Forwarded-Host": "public.example:8443", "X-Kept": "yes"}
			for k, v := range want {
				if got := h.Values(k); len(got) != 1 || got[0] != v {
					t.Errorf("upstream got %s %q, want %q", k, got, v)
				}
			}
			for _, name := range []string{"X-Up-Secret", "Keep-Alive", "Proxy-Authenticate"} {
				if v := resp.Header.Values(name); len(v) > 0 {
					t.Errorf("client got hop-by-hop %s: %q", name, v)
				}
			}
		})
	}
}

// TestHardeningSlowBody: a client that dribbles its body ("slow POST") holds
// its request at most for the route's timeout, and the stall is the
// client's: 408, not an upstream error, and the breaker does not blame the
// upstream.
func TestHardeningSlowBody(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	g := startGateway(t, fmt.Sprintf(`upstreams:
  up:
    targets: [%q]
    timeout: 1s
routes:
  - path: /slow
    upstream: up
    resource: slow
degradeRules:
  - resource: slow
    strategy: errorCount
    threshold: 2
    minRequestAmount: 1
    statIntervalMs: 60000
    retryTimeoutMs: 60000
`, up.URL))
	const clients = 3
	type outcome struct {
		status int
		took   time.Duration
	}
	done := make(chan outcome, clients)
	for range clients {
		go func() {
			start := time.Now()
			c, err := net.Dial("tcp", hdAddr(g.URL))
			if err != nil {
				done <- outcome{-1, 0}
				return
			}
			defer c.Close()
			io.WriteString(c, "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
			stop := make(chan struct{})
			go func() {
				for i := 0; i < 100; i++ {
					select {
					case <-stop:
						return
					case <-time.After(300 * time.Millisecond):
					}
					if _, err := c.Write([]byte("x")); err != nil {
						return
					}
				}
			}()
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			close(stop)
			if err != nil {
				done <- outcome{0, time.Since(start)}
				return
			}
			done <- outcome{resp.StatusCode, time.Since(start)}
		}()
	}
	for range clients {
		o := <-done
		if o.status != 408 {
			t.Errorf("slow body: status %d after %v, want 408", o.status, o.took)
		}
		if o.took > 4*time.Second {
			t.Errorf("slow body held for %v; the route timeout is 1 s", o.took)
		}
	}
	hdWaitConcurrencyZero(t, g, "slow")
	if n := hdErrors(t, g, "slow"); n != 0 {
		t.Errorf("sluice_requests_total{result=\"error\"} = %v after slow clients, want 0", n)
	}
	if resp, _ := get(t, g.URL+"/slow"); resp.StatusCode != 200 {
		t.Errorf("a good request after slow clients: %d %s, want 200", resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"))
	}
}
