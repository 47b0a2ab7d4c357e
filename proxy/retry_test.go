package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// countingUp is an upstream that reads each whole request, counts it by
// method, then does what its mode says: answer 200 "ok", answer 503, or
// reset the connection (an RST, after reading the request).
type countingUp struct {
	ln     net.Listener
	mode   string // ok | 503 | reset | halfhead
	mu     sync.Mutex
	seen   map[string]int
	bodies []int // length of each request body read
}

func newCountingUp(t *testing.T, mode string) *countingUp {
	t.Helper()
	u := &countingUp{mode: mode, seen: map[string]int{}}
	u.ln = serveConns(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			n, _ := io.Copy(io.Discard, r.Body)
			u.mu.Lock()
			u.seen[r.Method]++
			u.bodies = append(u.bodies, int(n))
			u.mu.Unlock()
			switch u.mode {
			case "reset":
				c.(*net.TCPConn).SetLinger(0)
				return
			case "halfhead": // part of an answer's head, then a reset
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Le")
				time.Sleep(10 * time.Millisecond)
				c.(*net.TCPConn).SetLinger(0)
				return
			case "503":
				io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy")
			default:
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
		}
	})
	return u
}

func (u *countingUp) url() string { return "http://" + u.ln.Addr().String() }

func (u *countingUp) count(method string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[method]
}

// refusedURL is a loopback address nobody listens on.
func refusedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

// retryGateway serves /* on an upstream of the given targets (round robin,
// the first one first) with retries, on a forced forwarder; it counts
// passes and errors of the route's resource.
func retryGateway(t *testing.T, fwd string, retries int, targets ...string) (string, *counter, *proxy.Gateway) {
	t.Helper()
	c := &counter{}
	q := make([]string, len(targets))
	for i, s := range targets {
		q[i] = fmt.Sprintf("%q", s)
	}
	rules := fmt.Sprintf(`
upstreams:
  up:
    targets: [%s]
    timeout: 2s
    retries: %d
    retryBudget: 1
routes:
  - path: /*
    upstream: up
    resource: r
flowRules:
  - resource: r
    count: 1000000
`, strings.Join(q, ", "), retries)
	cfg, err := config.Parse("retry.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: fwd, Observer: func(string) proxy.Observer { return c }})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv.URL, c, g
}

// send sends one request; a body of unknown length when chunked.
func send(t *testing.T, method, url, body string, chunked bool) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd)
		}
	}
	req, _ := http.NewRequest(method, url, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRetrySafety: what is sent again, on both forwarders, exactly as
// docs/upstreams.md#retries says. Each case's first target fails; the
// second answers 200.
func TestRetrySafety(t *testing.T) {
	big := strings.Repeat("b", 64<<10+1) // over the 64 KiB a forwarder keeps
	cases := []struct {
		name, mode, method, body string
		chunked                  bool
		retries                  int
		want                     int // status the client gets
		firstGets                int // requests the failing target saw
	}{
		// A refused connection: nothing was sent, so any method goes on.
		{"refused GET", "refused", "GET", "", false, 1, 200, 0},
		{"refused POST", "refused", "POST", "order=1", false, 1, 200, 0},
		// A reset after the target read the request: GETs and PUTs go on;
		// a POST was read and is never sent again.
		{"reset GET", "reset", "GET", "", false, 1, 200, 1},
		{"reset PUT", "reset", "PUT", "v=1", false, 1, 200, 1},
		{"reset POST", "reset", "POST", "order=1", false, 1, 502, 1},
		// A reset after part of the answer came is not sent again, GET
		// or not: the target answered (SPEC section 9, "before any byte
		// of the answer").
		{"reset in the head GET", "halfhead", "GET", "", false, 1, 502, 1},
		// 503: sent again when idempotent; a POST gets the target's answer.
		{"503 GET", "503", "GET", "", false, 1, 200, 1},
		{"503 DELETE", "503", "DELETE", "", false, 1, 200, 1},
		{"503 POST", "503", "POST", "order=1", false, 1, 503, 1},
		// retries: 0 sends nothing again.
		{"no retries", "503", "GET", "", false, 0, 503, 1},
		{"no retries refused", "refused", "GET", "", false, 0, 502, 0},
		// A body not kept (over 64 KiB, or of unknown length) goes again
		// only when none of it was sent.
		{"refused big PUT", "refused", "PUT", big, false, 1, 200, 0},
		{"refused chunked POST", "refused", "POST", "order=1", true, 1, 200, 0},
		{"reset big PUT", "reset", "PUT", big, false, 1, 502, 1},
		{"reset chunked PUT", "reset", "PUT", "v=1", true, 1, 502, 1},
	}
	for _, fwd := range []string{"standard", "fast"} {
		for _, c := range cases {
			t.Run(fwd+"/"+c.name, func(t *testing.T) {
				good := newCountingUp(t, "ok")
				first, firstURL := (*countingUp)(nil), refusedURL(t)
				if c.mode != "refused" {
					first = newCountingUp(t, c.mode)
					firstURL = first.url()
				}
				gw, cnt, _ := retryGateway(t, fwd, c.retries, firstURL, good.url())
				// Round robin with equal weights starts with the first target.
				st, _ := send(t, c.method, gw+"/x", c.body, c.chunked)
				if st != c.want {
					t.Errorf("client got %d, want %d", st, c.want)
				}
				if first != nil {
					if n := first.count(c.method); n != c.firstGets {
						t.Errorf("failing target saw %d %s, want %d", n, c.method, c.firstGets)
					}
				}
				wantGood := 0
				if c.want == 200 {
					wantGood = 1
				}
				if n := good.count(c.method); n != wantGood {
					t.Errorf("good target saw %d %s, want %d", n, c.method, wantGood)
				}
				if wantGood == 1 && good.bodies[0] != len(c.body) {
					t.Errorf("good target got a body of %d bytes, want %d", good.bodies[0], len(c.body))
				}
				// Rules count the client's request once, whatever its retries.
				pass, errs := cnt.counts()
				if pass+errs != 1 {
					t.Errorf("resource counted %d passes + %d errors for 1 request", pass, errs)
				}
			})
		}
	}
}

// TestRetryAfterStaleConnections: a target that went away after serving
// (its pooled keep-alive connections closed, new ones refused) costs the
// clients nothing: on both forwarders, GETs and POSTs sent to it are sent
// to the other target, since nothing of them was written. The fast path
// finds every pooled connection closed, one after another; that is a
// connection failure, not a broken exchange.
func TestRetryAfterStaleConnections(t *testing.T) {
	for _, fwd := range []string{"fast", "standard"} {
		t.Run(fwd, func(t *testing.T) {
			good := newCountingUp(t, "ok")
			gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				time.Sleep(20 * time.Millisecond) // concurrent requests open several connections
				io.WriteString(w, "ok")
			}))
			url, _, _ := retryGateway(t, fwd, 1, gone.URL, good.url())
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if code, _ := send(t, "GET", url+"/warm", "", false); code != 200 {
						t.Errorf("warm-up: %d", code)
					}
				}()
			}
			wg.Wait()
			gone.Close() // its idle connections closed, its port refuses
			time.Sleep(30 * time.Millisecond)
			for i := range 8 {
				method, body := "GET", ""
				if i%2 == 1 {
					method, body = "POST", "order=1"
				}
				if code, b := send(t, method, url+"/x", body, false); code != 200 {
					t.Errorf("%s %d after the target went away: %d %q, want 200 from the other target", method, i, code, b)
				}
			}
			if n := good.count("POST"); n != 4 {
				t.Errorf("the other target got %d POSTs, want each of the 4 once", n)
			}
		})
	}
}

// TestStaleConnectionKeepsStreamedBody: a streamed body (unknown length,
// not kept) forced onto the fast path over a pooled connection the target
// closed while idle: the header and the body's first bytes are read into
// the write buffer before the dead connection is found. That attempt is
// not retried with the rest of the body: no target ever gets a body cut
// short (a corrupted POST answered 200).
func TestStaleConnectionKeepsStreamedBody(t *testing.T) {
	good := newCountingUp(t, "ok")
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	url, _, _ := retryGateway(t, "fast", 1, gone.URL, good.url())
	for range 2 { // one pooled connection to each target
		if code, _ := send(t, "GET", url+"/warm", "", false); code != 200 {
			t.Fatalf("warm-up: %d", code)
		}
	}
	gone.Close()
	time.Sleep(30 * time.Millisecond) // past idleProbe: the pooled connection is peeked
	body := strings.Repeat("p", 100<<10)
	for i := range 4 {
		// The 502 comes while the client still streams its body, and in
		// about 3 runs of 20 (before and after 40da474) the gateway's
		// connection is reset under the client's write, which loses the
		// 502 too: a known gap (the answer should be read whole by the
		// client), left for its own fix. What this test is about is the
		// other target's bodies, checked below.
		req, _ := http.NewRequest("POST", url+"/x", io.MultiReader(strings.NewReader(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("POST %d: %v", i, err)
			}
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if code := resp.StatusCode; code != 200 && code != 502 {
			t.Errorf("POST %d: %d, want 200 (sent whole) or 502 (not sent again)", i, code)
		}
	}
	good.mu.Lock()
	defer good.mu.Unlock()
	for i, n := range good.bodies {
		if n != 0 && n != len(body) {
			t.Errorf("request %d reached the other target with a body of %d bytes, want %d or none", i, n, len(body))
		}
	}
}
