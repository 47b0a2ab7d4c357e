package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"

	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// seen is what the upstream saw of one request.
type seen struct {
	Method, RequestURI, Host string
	Header                   http.Header
	Body                     string
	ContentLength            int64
	TransferEncoding         []string
}

// got is what the client got back.
type got struct {
	Status  int
	Header  http.Header
	Body    string
	Trailer http.Header
}

// recorder is an upstream that records each request by its X-Case header
// and answers as the case asks.
type recorder struct {
	mu   sync.Mutex
	seen map[string]seen
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.seen[r.Header.Get("X-Case")] = seen{r.Method, r.RequestURI, r.Host, r.Header.Clone(), string(body),
		r.ContentLength, r.TransferEncoding}
	rec.mu.Unlock()
	h := w.Header()
	switch r.Header.Get("X-Case") {
	case "hop-response":
		h.Set("Connection", "X-Resp-Hop")
		h.Set("X-Resp-Hop", "secret")
		h.Set("Keep-Alive", "timeout=5")
		h.Add("Set-Cookie", "a=1")
		h.Add("Set-Cookie", "b=2")
		h.Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	case "no-content-type":
		io.WriteString(w, "<html><body>sniff me</body></html>")
	case "trailers":
		h.Set("Trailer", "X-Checksum")
		h.Set("Content-Type", "text/plain")
		io.WriteString(w, "part1 ")
		w.(http.Flusher).Flush()
		io.WriteString(w, "part2")
		h.Set("X-Checksum", "abc")
		h.Set(http.TrailerPrefix+"X-Late", "late")
	case "trailer-and-head":
		// A field in the head and again in the trailers: the trailers
		// carry the trailer's value only.
		h.Set("Trailer", "X-Checksum")
		h.Set("X-Checksum", "head")
		io.WriteString(w, "part1 ")
		w.(http.Flusher).Flush()
		h.Set("X-Checksum", "tail")
	case "chunked":
		for i := 0; i < 3; i++ {
			fmt.Fprintf(w, "chunk%d;", i)
			w.(http.Flusher).Flush()
		}
	case "large":
		h.Set("Content-Type", "application/octet-stream")
		w.Write([]byte(strings.Repeat("0123456789abcdef", 200<<10/16)))
	case "status":
		h.Set("Location", "/elsewhere")
		w.WriteHeader(http.StatusFound)
	case "no-body":
		w.WriteHeader(http.StatusNoContent)
	default:
		h.Set("Content-Type", "text/plain")
		io.WriteString(w, "hello")
	}
}

// parityGateway serves rules through a real listener with the forwarder forced.
func parityGateway(t *testing.T, fwd, rules string) string {
	t.Helper()
	srv := httptest.NewServer(loadedGateway(t, fwd, rules))
	t.Cleanup(srv.Close)
	return srv.URL
}

// loadedGateway is a Gateway with rules loaded and the forwarder forced
// (fwd; "" for the default), closed when the test ends.
func loadedGateway(t *testing.T, fwd, rules string) *proxy.Gateway {
	t.Helper()
	cfg, err := config.Parse("rules.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: fwd})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// countedGateway serves one route /* to target with the forwarder forced,
// the given upstream timeout and an observer counting passes and errors; it
// returns the gateway's host:port.
func countedGateway(t *testing.T, fwd, target, timeout string) (string, *counter) {
	t.Helper()
	c := &counter{}
	cfg, err := config.Parse("counted.yaml", []byte(fmt.Sprintf(
		"upstreams:\n  up:\n    targets: [%q]\n    timeout: %s\nroutes:\n  - path: /*\n    upstream: up\n    resource: r\n", target, timeout)))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: fwd, Observer: func(string) proxy.Observer { return c }})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), c
}

// TestTransportsSendAndAnswerAlike is the transport seam: the attempts
// loop and the outgoing request (outgoing.go) are one for both paths, so
// the same request forced each way is the same prepared request, and the
// two transports must send the same request (what the upstream saw) and
// stream the same answer back (what the client got), field by field.
func TestTransportsSendAndAnswerAlike(t *testing.T) {
	rec := &recorder{seen: map[string]seen{}}
	up := httptest.NewServer(rec)
	defer up.Close()
	rules := fmt.Sprintf(`
trustedProxies: ["127.0.0.1/32"]
upstreams:
  up:
    targets: [%q]
  based:
    targets: ["%s/base/"]
routes:
  - path: /api/*
    upstream: up
    stripPrefix: /api
  - path: /based/*
    upstream: based
    stripPrefix: /based
  - path: /*
    upstream: up
`, up.URL, up.URL)
	type req struct {
		name, method, path, body string
		header                   []string
		chunked                  bool
	}
	cases := []req{
		{name: "plain", method: "GET", path: "/p/q?x=1&y=%20z"},
		{name: "hop-request", method: "GET", path: "/p", header: []string{
			"Connection: keep-alive, X-Hop", "X-Hop: drop me", "Keep-Alive: timeout=5", "Proxy-Authorization: Basic x",
			"Proxy-Connection: keep-alive", "X-Keep: kept", "User-Agent: test-agent/1", "Cookie: a=1; b=2",
			"X-Multi: one", "X-Multi: two", "Forwarded: for=6.6.6.6"}},
		{name: "xff-chain", method: "GET", path: "/p", header: []string{"X-Forwarded-For: 10.1.1.1, 10.2.2.2",
			"X-Forwarded-Host: spoof", "X-Forwarded-Proto: https"}},
		// Cookies reach the upstream byte for byte, quoting and lines kept.
		{name: "cookie-lines", method: "GET", path: "/p", header: []string{"Cookie: a=1", "Cookie: b=2"}},
		{name: "cookie-quoted", method: "GET", path: "/p", header: []string{`Cookie: a="x y";b=2; flag`}},
		{name: "user-agents", method: "GET", path: "/p", header: []string{"User-Agent: a", "User-Agent: b"}},
		{name: "gzip-client", method: "GET", path: "/p", header: []string{"Accept-Encoding: gzip"}},
		{name: "te-trailers", method: "GET", path: "/p", header: []string{"TE: trailers, deflate"}},
		{name: "post", method: "POST", path: "/form", body: "a=1&b=2", header: []string{"Content-Type: application/x-www-form-urlencoded"}},
		{name: "post-empty", method: "POST", path: "/form"},
		{name: "delete", method: "DELETE", path: "/thing/1"},
		{name: "put-chunked", method: "PUT", path: "/up", body: strings.Repeat("x", 1000), chunked: true},
		{name: "strip", method: "GET", path: "/api/users/7?z=9"},
		{name: "escaped", method: "GET", path: "/api/a%2Fb/c%20d"},
		{name: "target-path", method: "GET", path: "/based/x/y?q=1"},
		{name: "target-path-root", method: "GET", path: "/based"},
		{name: "hop-response", method: "GET", path: "/r"},
		{name: "no-content-type", method: "GET", path: "/r"},
		{name: "trailers", method: "GET", path: "/r"},
		{name: "trailer-and-head", method: "GET", path: "/r"},
		{name: "chunked", method: "GET", path: "/r"},
		{name: "large", method: "GET", path: "/r"},
		{name: "status", method: "GET", path: "/r"},
		{name: "no-body", method: "GET", path: "/r"},
		{name: "head", method: "HEAD", path: "/r"},
	}
	// No Accept-Encoding unless a case sends one.
	client := &http.Transport{DisableCompression: true}
	defer client.CloseIdleConnections()
	run := func(fwd string) (map[string]seen, map[string]got) {
		base := parityGateway(t, fwd, rules)
		clear(rec.seen)
		answers := map[string]got{}
		for _, c := range cases {
			var body io.Reader
			if c.body != "" {
				body = strings.NewReader(c.body)
				if c.chunked {
					body = struct{ io.Reader }{body} // unknown length: sent chunked
				}
			}
			r, err := http.NewRequest(c.method, base+c.path, body)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range c.header {
				k, v, _ := strings.Cut(h, ":")
				r.Header.Add(k, strings.TrimSpace(v))
			}
			r.Header.Set("X-Case", c.name)
			r.Host = "gw.example" // both gateways are seen under one name
			resp, err := client.RoundTrip(r)
			if err != nil {
				t.Fatalf("%s %s: %v", fwd, c.name, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Header.Del("Date")
			answers[c.name] = got{resp.StatusCode, resp.Header, string(b), resp.Trailer}
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		out := map[string]seen{}
		for k, v := range rec.seen {
			out[k] = v
		}
		return out, answers
	}
	stdSeen, stdGot := run("standard")
	fastSeen, fastGot := run("fast")
	// The one known difference: fasthttp frames an empty body of any
	// method but GET/HEAD with Content-Length: 0, net/http only for
	// POST/PUT/PATCH. Harmless (RFC 9110 8.6 allows it).
	if h := fastSeen["delete"].Header; h.Get("Content-Length") == "0" {
		h.Del("Content-Length")
	}
	for _, c := range cases {
		if !reflect.DeepEqual(stdSeen[c.name], fastSeen[c.name]) {
			t.Errorf("%s: upstream saw\nstandard %+v\nfast     %+v", c.name, stdSeen[c.name], fastSeen[c.name])
		}
		s, f := stdGot[c.name], fastGot[c.name]
		if !reflect.DeepEqual(s, f) {
			t.Errorf("%s: client got\nstandard %d %v %q trailer %v\nfast     %d %v %q trailer %v", c.name,
				s.Status, s.Header, trunc(s.Body), s.Trailer, f.Status, f.Header, trunc(f.Body), f.Trailer)
		}
	}
	// A few absolute checks, so that both being wrong alike fails too.
	for fwd, seenBy := range map[string]map[string]seen{"standard": stdSeen, "fast": fastSeen} {
		h := seenBy["hop-request"].Header
		for _, k := range []string{"X-Hop", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Connection", "Forwarded"} {
			if v, ok := h[k]; ok {
				t.Errorf("%s: hop-by-hop %s reached the upstream: %q", fwd, k, v)
			}
		}
		if got := seenBy["xff-chain"].Header.Get("X-Forwarded-For"); got != "10.1.1.1, 10.2.2.2, 127.0.0.1" {
			t.Errorf("%s: X-Forwarded-For from a trusted peer = %q", fwd, got)
		}
		if got := seenBy["xff-chain"].Header.Get("X-Forwarded-Proto"); got != "https" {
			t.Errorf("%s: X-Forwarded-Proto: https from a trusted peer over plain HTTP = %q, want it kept", fwd, got)
		}
		if got := seenBy["plain"].Header.Get("X-Forwarded-Proto"); got != "http" {
			t.Errorf("%s: X-Forwarded-Proto of a plain request = %q", fwd, got)
		}
		if got := seenBy["plain"].Header.Get("Accept-Encoding"); got != "" {
			t.Errorf("%s: the upstream was asked for %q on behalf of a client that did not ask", fwd, got)
		}
		if got := seenBy["strip"].RequestURI; got != "/users/7?z=9" {
			t.Errorf("%s: stripped RequestURI = %q", fwd, got)
		}
		if got := seenBy["target-path"].RequestURI; got != "/base/x/y?q=1" {
			t.Errorf("%s: joined RequestURI = %q", fwd, got)
		}
		if got := seenBy["put-chunked"].Body; len(got) != 1000 {
			t.Errorf("%s: chunked body reached the upstream with %d bytes", fwd, len(got))
		}
	}
	for fwd, gotBy := range map[string]map[string]got{"standard": stdGot, "fast": fastGot} {
		a := gotBy["trailer-and-head"]
		if v := a.Header.Values("X-Checksum"); len(v) != 1 || v[0] != "head" {
			t.Errorf("%s: a field in the head and the trailers: head %q, want [head]", fwd, v)
		}
		if v := a.Trailer.Values("X-Checksum"); len(v) != 1 || v[0] != "tail" {
			t.Errorf("%s: a field in the head and the trailers: trailers %q, want [tail]", fwd, v)
		}
	}
	if tr := fastGot["trailers"].Trailer; tr.Get("X-Checksum") != "abc" || tr.Get("X-Late") != "late" {
		t.Errorf("fast: trailers = %v", tr)
	}
	if h := fastGot["hop-response"].Header; h.Get("X-Resp-Hop") != "" || h.Get("Keep-Alive") != "" || len(h["Set-Cookie"]) != 2 {
		t.Errorf("fast: response header = %v", h)
	}
}

func trunc(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%s...(%d bytes)", s[:80], len(s))
	}
	return s
}

// counter is an Observer counting outcomes.
type counter struct {
	mu                    sync.Mutex
	pass, error, tooLarge int
}

func (c *counter) Pass(time.Duration)          { c.mu.Lock(); c.pass++; c.mu.Unlock() }
func (c *counter) Error(time.Duration)         { c.mu.Lock(); c.error++; c.mu.Unlock() }
func (c *counter) Block(string, time.Duration) {}
func (c *counter) DryRun()                     {}
func (c *counter) TooLarge()                   { c.mu.Lock(); c.tooLarge++; c.mu.Unlock() }
func (c *counter) counts() (int, int)          { c.mu.Lock(); defer c.mu.Unlock(); return c.pass, c.error }
func (c *counter) snapshot() (pass, errs, tooLarge int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pass, c.error, c.tooLarge
}

// TestStreamLeftByClient: a client that leaves an event stream on either
// path frees its concurrency slot and is counted a pass, not an error of
// the upstream's (route.forward); the failures themselves are the attempts
// loop's (TestForwardingPolicy) and the seam's (TestTransportsFailAlike).
func TestStreamLeftByClient(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer up.Close()

	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			obs := map[string]*counter{}
			var mu sync.Mutex
			cfg, err := config.Parse("fail.yaml", []byte(fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
    timeout: 300ms
routes:
  - path: /*
    upstream: up
    resource: r
flowRules:
  - resource: r
    grade: concurrency
    count: 1
`, up.URL)))
			if err != nil {
				t.Fatal(err)
			}
			g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: fwd, Observer: func(res string) proxy.Observer {
				mu.Lock()
				defer mu.Unlock()
				if obs[res] == nil {
					obs[res] = &counter{}
				}
				return obs[res]
			}})
			if err := g.Load(cfg); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(g)
			defer srv.Close()

			wantPass, wantErr := 0, 0
			// The client leaves an event stream: released, and (route.go)
			// not an error of the upstream's.
			conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
			line, _ := bufio.NewReader(conn).ReadString('\n')
			if !strings.Contains(line, "200") {
				t.Errorf("stream: %q", line)
			}
			conn.Close()
			wantPass++

			// Every slot came back: a request passes again (poll: the
			// stream's release runs when the gateway notices the close).
			deadline := time.Now().Add(5 * time.Second)
			for {
				resp, err := http.Get(srv.URL + "/ok")
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == 200 {
						wantPass++
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("concurrency slot never released: last status %v %v", resp.StatusCode, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The stream's pass is counted just after its slot is freed
			// (route.forward): poll for it.
			pass, errs := obs["r"].counts()
			for (pass != wantPass || errs != wantErr) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
				pass, errs = obs["r"].counts()
			}
			if pass != wantPass || errs != wantErr {
				t.Errorf("observed pass %d error %d, want %d %d", pass, errs, wantPass, wantErr)
			}
		})
	}
}

// TestForwarderOverrideRejectsUnknown: a bad override fails every Load.
func TestForwarderOverrideRejectsUnknown(t *testing.T) {
	cfg, err := config.Parse("x.yaml", []byte("upstreams:\n  up:\n    targets: [\"http://127.0.0.1:1\"]\nroutes:\n  - path: /\n    upstream: up\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: "turbo"})
	if err := g.Load(cfg); err == nil || !strings.Contains(err.Error(), "turbo") {
		t.Fatalf("Load with forwarder turbo: %v, want an error naming it", err)
	}
}

// TestClientFaultsAreNotUpstreamErrors: a broken chunked body and a client
// that hangs up mid-upload get 400 (or nothing) on both forwarders and are
// not counted as upstream errors; a path with dot segments is refused.
func TestClientFaultsAreNotUpstreamErrors(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	defer up.Close()
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			addr, c := countedGateway(t, fwd, up.URL, "300ms")
			raw := func(req string, hangUp bool) int {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				io.WriteString(conn, req)
				if hangUp {
					conn.(*net.TCPConn).CloseWrite()
				}
				conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					return 0
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if st := raw("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false); st != 400 {
				t.Errorf("broken chunked body: %d, want 400", st)
			}
			// Known length, cut short (the fast path reads it whole).
			if st := raw("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nonly a little", true); st != 400 && st != 0 {
				t.Errorf("upload cut short: %d, want 400 or nothing", st)
			}
			for _, p := range []string{"/a/../b", "/a/%2e%2e/b", "/a/..%2fb", "/a/./b"} {
				if st := raw("GET "+p+" HTTP/1.1\r\nHost: x\r\n\r\n", false); st != 400 {
					t.Errorf("GET %s: %d, want 400", p, st)
				}
			}
			if st := raw("GET /a/..b/.c HTTP/1.1\r\nHost: x\r\n\r\n", false); st != 200 {
				t.Errorf("GET /a/..b/.c (no dot segment): %d, want 200", st)
			}
			// A body dribbled a byte at a time is cut at the route timeout
			// (300ms here) with 408; the client's read deadline only stops
			// the test from hanging if nothing comes.
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(conn, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
					if _, err := conn.Write([]byte("x")); err != nil {
						return
					}
				}
			}()
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			close(stop)
			conn.Close()
			if err != nil || resp.StatusCode != 408 {
				t.Errorf("slow body: %v %v, want 408", resp, err)
			}
			if _, errs := c.counts(); errs != 0 {
				t.Errorf("%d upstream errors counted for client faults, want 0", errs)
			}
		})
	}
}

// TestForwarderOverride: a Deps.Forwarder that is not a forwarder fails
// every Load with an error that says so; a valid one loads.
func TestForwarderOverride(t *testing.T) {
	cfg, err := config.Parse("x.yaml", []byte("upstreams:\n  up:\n    targets: [\"http://127.0.0.1:1\"]\nroutes:\n  - path: /\n    upstream: up\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: "bogus"}).Load(cfg); err == nil || !strings.Contains(err.Error(), "forwarder override") {
		t.Fatalf("Load with Forwarder bogus: %v, want an error naming the override", err)
	}
	if proxy.CheckForwarder("bogus") == nil || proxy.CheckForwarder("fast") != nil || proxy.CheckForwarder("") != nil {
		t.Error("CheckForwarder disagrees with Load")
	}
	if err := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: "standard"}).Load(cfg); err != nil {
		t.Fatalf("Load with Forwarder standard: %v", err)
	}
}
