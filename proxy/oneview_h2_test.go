package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/internal/h2test"
)

// lineUp is an upstream that records each request's line and body length,
// byte for byte as an HTTP/1.1 parser other than Go's meets them, and
// answers 200.
type lineUp struct {
	mu      sync.Mutex
	lines   []string
	ln      net.Listener
	arrived chan struct{} // a request was read (dropped when none waits)
}

func newLineUp(t *testing.T) *lineUp {
	u := &lineUp{arrived: make(chan struct{}, 1)}
	u.ln = serveConns(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			length := 0
			for {
				h, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if h == "\r\n" {
					break
				}
				if name, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(name, "Content-Length") {
					length, _ = strconv.Atoi(strings.TrimSpace(v))
				}
			}
			if _, err := io.CopyN(io.Discard, br, int64(length)); err != nil {
				return
			}
			u.mu.Lock()
			u.lines = append(u.lines, fmt.Sprintf("%s body %d", strings.TrimSuffix(line, "\r\n"), length))
			u.mu.Unlock()
			select {
			case u.arrived <- struct{}{}:
			default:
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return u
}

func (u *lineUp) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.lines...)
}

// h2cGateway serves rules over HTTP/1.1 and h2c (prior knowledge) with the
// forwarder forced, and returns its host:port.
func h2cGateway(t *testing.T, fwd, rules string) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(loadedGateway(t, fwd, rules))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestH2MethodIsOneToken: Go's h2 server takes any :method, where its
// HTTP/1 server refuses one that is no token. "GET " or "GET /admin?" missed
// the route of methods: [GET] and its limit, went to the route taking every
// method, and the fast path wrote it into the upstream's request line
// ("GET  /item/x HTTP/1.1"), which nginx and Python read as GET /item/x: a
// GET past its limit. On both forwarders, a method that is no token is 400,
// charged to no rule, and nothing reaches the upstream; every request that
// does reach it has a request line of three fields, its method as routed.
func TestH2MethodIsOneToken(t *testing.T) {
	for _, fwd := range []string{"fast", "standard"} {
		t.Run(fwd, func(t *testing.T) {
			up := newLineUp(t)
			addr := h2cGateway(t, fwd, fmt.Sprintf(methodRules, "http://"+up.ln.Addr().String()))
			call := func(method string) string {
				return h2test.Call(t, addr, [][2]string{{":method", method}, {":scheme", "http"}, {":authority", "gw.test"}, {":path", "/item/x"}}, nil)
			}
			for _, m := range []string{"GET ", "GET /admin?", " GET", "GET\t", "G(ET)", "GE,T", "GET\x00", "PROPFIND ", "GET /item/x HTTP/1.1\r\nX:"} {
				before := len(up.seen())
				if st := call(m); st != "400" && st != "reset" {
					t.Errorf(":method %q: %s, want 400", m, st)
				}
				if got := up.seen(); len(got) != before {
					t.Errorf(":method %q reached the upstream as %q", m, got[before:])
				}
			}
			// Nothing above was charged: the GET route's count of 1 and the
			// other route's of 3 are whole.
			for i, step := range []struct{ method, want string }{
				{"GET", "200"}, {"GET", "429"}, {"PROPFIND", "200"}, {"PATCH", "200"}, {"PATCH", "200"}, {"PATCH", "429"},
			} {
				if st := call(step.method); st != step.want {
					t.Errorf("step %d: %s: %s, want %s", i, step.method, st, step.want)
				}
			}
			want := []string{"GET /item/x HTTP/1.1 body 0", "PROPFIND /item/x HTTP/1.1 body 0", "PATCH /item/x HTTP/1.1 body 0", "PATCH /item/x HTTP/1.1 body 0"}
			if got := up.seen(); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("the upstream read %q, want %q", got, want)
			}
		})
	}
}

// TestH2ContentLengthMustBeTheBodys: Go's h2 server reads only the first
// content-length field and takes one that is no number as 0, so a POST
// declaring "abc" (or 5 bytes on a stream its headers end) was forwarded
// as a request with no body and counted, while the client's stream was
// reset: RFC 9113 §8.1.1 calls it malformed, not to be forwarded. On both
// forwarders such a request is 400 or reset, charged to no rule, and
// nothing reaches the upstream.
func TestH2ContentLengthMustBeTheBodys(t *testing.T) {
	five := []byte("hello")
	for _, fwd := range []string{"fast", "standard"} {
		t.Run(fwd, func(t *testing.T) {
			up := newLineUp(t)
			addr := h2cGateway(t, fwd, fmt.Sprintf(methodRules, "http://"+up.ln.Addr().String()))
			post := func(body []byte, lengths ...string) string {
				f := [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "gw.test"}, {":path", "/post/x"}}
				for _, l := range lengths {
					f = append(f, [2]string{"content-length", l})
				}
				return h2test.Call(t, addr, f, body)
			}
			for _, c := range []struct {
				body    []byte
				lengths []string
			}{
				{five, []string{"abc"}},
				{five, []string{"+5"}},
				{five, []string{"-5"}},
				{five, []string{"5", "6"}},
				{five, []string{"5", "abc"}},
				{nil, []string{"5"}},
				{nil, []string{"abc"}},
			} {
				before := len(up.seen())
				if st := post(c.body, c.lengths...); st != "400" && st != "reset" {
					t.Errorf("content-length %q, %d bytes: %s, want 400", c.lengths, len(c.body), st)
				}
				if got := up.seen(); len(got) != before {
					t.Errorf("content-length %q, %d bytes reached the upstream as %q", c.lengths, len(c.body), got[before:])
				}
			}
			// Nothing above was charged (count 3), and a true length passes.
			for i, c := range []struct {
				lengths []string
				want    string
			}{{[]string{"5"}, "200"}, {[]string{"5", "5"}, "200"}, {[]string{"05"}, "200"}, {[]string{"5"}, "429"}} {
				if st := post(five, c.lengths...); st != c.want {
					t.Errorf("step %d: content-length %q: %s, want %s", i, c.lengths, st, c.want)
				}
			}
			want := "POST /post/x HTTP/1.1 body 5"
			if got := up.seen(); len(got) != 3 || got[0] != want || got[1] != want || got[2] != want {
				t.Errorf("the upstream read %q, want %q three times", got, want)
			}
		})
	}
}

// TestH2DeclaredEmptyBodyIsWaitedFor: an h2 request declaring
// content-length 0 on a stream its headers do not end is malformed if
// DATA then comes (RFC 9113 §8.1.1), and Go's h2 server resets the stream
// when it does; but it has handed the request to the handler already,
// which read no body for a length of 0. So the POST was forwarded with no
// body and counted, while the client's stream was reset: the upstream
// served a request the client never sent (the one-view differential met
// it over h2c and TLS). On both forwarders the gateway waits for such a
// stream's end before it routes: content is 400 or reset, charged to no
// rule, and nothing reaches the upstream; an empty end (an empty DATA
// frame) is the empty POST declared; a stream still open after
// server.readHeaderTimeout is 408, charged to no rule.
func TestH2DeclaredEmptyBodyIsWaitedFor(t *testing.T) {
	for _, fwd := range []string{"fast", "standard"} {
		t.Run(fwd, func(t *testing.T) {
			t.Parallel() // each its own gateways and upstreams; they mostly wait
			send := func(addr, length string, body []byte, wait func() bool) h2test.Answer {
				c, err := h2test.Dial(addr, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				a, _ := c.Send(h2test.Request{Fields: [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "gw.test"},
					{":path", "/post/x"}, {"content-length", length}}, Data: [][]byte{body}, Before: func(int) bool { return wait == nil || wait() }})
				return a
			}
			post := func(addr string, body []byte, wait func() bool) string {
				a := send(addr, strconv.Itoa(len(body)), body, wait)
				if a.Status == "" {
					return "reset"
				}
				return a.Status
			}
			// The body comes once the upstream has the request, or 200 ms
			// after the headers, far within readHeaderTimeout (10 s).
			up := newLineUp(t)
			addr := h2cGateway(t, fwd, fmt.Sprintf(methodRules, "http://"+up.ln.Addr().String()))
			late := func() bool {
				select {
				case <-up.arrived:
				case <-time.After(200 * time.Millisecond):
				}
				return true
			}
			if a := send(addr, "0", []byte("hello"), late); a.Status != "" && a.Status != "400" {
				t.Errorf("content-length 0, then 5 bytes: %s, want 400 or reset", a.Status)
			}
			if got := up.seen(); len(got) != 0 {
				t.Errorf("content-length 0, then 5 bytes: the upstream read %q", got)
			}
			// An empty end is the empty POST; then two more fill the count
			// of 3, so nothing above was charged.
			for i, step := range []struct {
				body []byte
				want string
			}{{[]byte{}, "200"}, {[]byte("hello"), "200"}, {[]byte("hello"), "200"}, {[]byte("hello"), "429"}} {
				if st := post(addr, step.body, late); st != step.want {
					t.Errorf("step %d: %d bytes: %s, want %s", i, len(step.body), st, step.want)
				}
			}
			want := []string{"POST /post/x HTTP/1.1 body 0", "POST /post/x HTTP/1.1 body 5", "POST /post/x HTTP/1.1 body 5"}
			if got := up.seen(); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("the upstream read %q, want %q", got, want)
			}

			// A stream left open: 408 after readHeaderTimeout, uncharged.
			up = newLineUp(t)
			addr = h2cGateway(t, fwd, fmt.Sprintf(methodRules, "http://"+up.ln.Addr().String())+"server: {readHeaderTimeout: 200ms}\n")
			if st := post(addr, []byte{}, func() bool { return false }); st != "408" {
				t.Errorf("content-length 0 on a stream left open: %s, want 408", st)
			}
			for i, want := range []string{"200", "200", "200", "429"} {
				if st := post(addr, []byte{}, nil); st != want {
					t.Errorf("after the open stream, step %d: %s, want %s", i, st, want)
				}
			}
		})
	}
}

// TestH2ContentPastItsLengthIsNotForwarded: a DATA frame past an h2
// request's content-length makes Go's h2 server reset the stream (RFC 9113
// §8.1.1: malformed, not to be forwarded), but only when it comes: the
// declared length's worth, come first, was forwarded whole, a request the
// client never sent ("hell" of "hello", or "hello" of "hellox"), which the
// upstream served while the client's stream was reset. On both forwarders
// a body is handed over whole only once its end is seen: content past the
// length is 400 or reset, and the upstream never has a whole request. (It
// is counted: the guards ran before the body came, as for an HTTP/1.1 body
// that breaks off.) A body whose end comes late, in an empty DATA frame,
// is forwarded whole.
func TestH2ContentPastItsLengthIsNotForwarded(t *testing.T) {
	for _, fwd := range []string{"fast", "standard"} {
		t.Run(fwd, func(t *testing.T) {
			t.Parallel()
			up := newLineUp(t)
			addr := h2cGateway(t, fwd, fmt.Sprintf("upstreams:\n  up: {targets: [%q]}\nroutes:\n  - {path: /*, upstream: up, resource: any}\n",
				"http://"+up.ln.Addr().String()))
			// The last frame comes once the upstream has the request, or
			// 200 ms after the one before.
			late := func(i int) bool {
				if i > 0 {
					select {
					case <-up.arrived:
					case <-time.After(200 * time.Millisecond):
					}
				}
				return true
			}
			post := func(length string, data ...string) h2test.Answer {
				c, err := h2test.Dial(addr, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				q := h2test.Request{Fields: [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "gw.test"},
					{":path", "/post/x"}, {"content-length", length}}, Before: late}
				for _, d := range data {
					q.Data = append(q.Data, []byte(d))
				}
				a, _ := c.Send(q)
				return a
			}
			for _, c := range []struct {
				length string
				data   []string
			}{{"4", []string{"hell", "o"}}, {"5", []string{"hello", "x"}}, {"5", []string{"hel", "lo", "x"}}} {
				if a := post(c.length, c.data...); a.Status != "" && a.Status != "400" {
					t.Errorf("content-length %s, frames %q: %s, want 400 or reset", c.length, c.data, a.Status)
				}
				if got := up.seen(); len(got) != 0 {
					t.Errorf("content-length %s, frames %q: the upstream read %q", c.length, c.data, got)
				}
			}
			if a := post("5", "hello", ""); a.Status != "200" {
				t.Errorf("content-length 5, frames \"hello\" and an empty end: %q, want 200", a.Status)
			}
			if got, want := up.seen(), []string{"POST /post/x HTTP/1.1 body 5"}; strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("the upstream read %q, want %q", got, want)
			}
		})
	}
}

// TestConnectIsRefused: Go writes a CONNECT's body raw, as a tunnel's
// bytes, so an h2 CONNECT routed as "/" reached the upstream as
// "CONNECT / HTTP/1.1" followed by its DATA unframed, which the upstream
// read as requests of its own: GETs past the GET route's limit that no
// rule counted, with any X-Forwarded-For the client wrote (the audit of
// 2026-12-07). The gateway opens no tunnels: CONNECT is 405 in every form,
// over h2 (plain and extended) and HTTP/1.1, on both forwarders, charged to
// no rule, and nothing reaches the upstream.
func TestConnectIsRefused(t *testing.T) {
	smuggled := []byte("GET /item/x HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n" +
		"GET /item/x HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, fwd := range []string{"fast", "standard"} {
		t.Run(fwd, func(t *testing.T) {
			up := newLineUp(t)
			addr := h2cGateway(t, fwd, fmt.Sprintf(methodRules, "http://"+up.ln.Addr().String()))
			for _, f := range [][][2]string{
				{{":method", "CONNECT"}, {":authority", "gw.test:80"}},
				{{":method", "CONNECT"}, {":authority", up.ln.Addr().String()}},
				{{":method", "CONNECT"}, {":scheme", "http"}, {":authority", "gw.test"}, {":path", "/item/x"}, {":protocol", "websocket"}},
			} {
				if st := h2test.Call(t, addr, f, smuggled); st != "405" && st != "reset" {
					t.Errorf("h2 %q: %s, want 405", f, st)
				}
			}
			for _, raw := range []string{
				// (Bytes after a CONNECT without a length are the next
				// requests of the connection, which the gateway reads,
				// routes and limits itself.)
				"CONNECT gw.test:80 HTTP/1.1\r\nHost: gw.test:80\r\n\r\n",
				fmt.Sprintf("CONNECT / HTTP/1.1\r\nHost: gw.test\r\nContent-Length: %d\r\n\r\n%s", len(smuggled), smuggled),
			} {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = io.WriteString(c, raw)
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil || resp.StatusCode != 405 {
					t.Errorf("HTTP/1.1 %q: %v %v, want 405", raw, resp, err)
				}
				c.Close()
			}
			if got := up.seen(); len(got) != 0 {
				t.Fatalf("the upstream read %q", got)
			}
			// Nothing above was charged: the GET route's count of 1 is whole.
			get := [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "gw.test"}, {":path", "/item/x"}}
			for i, want := range []string{"200", "429"} {
				if st := h2test.Call(t, addr, get, nil); st != want {
					t.Errorf("GET %d: %s, want %s", i+1, st, want)
				}
			}
		})
	}
}
