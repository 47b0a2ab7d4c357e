package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// secondRequestUp answers the first request on each connection and fails
// the second as mode says: "close" (closed unanswered, as an upstream
// closing an idle keep-alive connection under a new request), "reset"
// (reset unanswered) or "halfhead" (part of an answer, then a reset).
type secondRequestUp struct {
	mu   sync.Mutex
	seen []string // method and path of every request read, in order
	ln   net.Listener
}

func newSecondRequestUp(t *testing.T, mode string) *secondRequestUp {
	u := &secondRequestUp{}
	u.ln = serveConns(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for n := 1; ; n++ {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			u.mu.Lock()
			seen := r.Method + " " + r.URL.Path
			if k := r.Header.Get("Idempotency-Key") + r.Header.Get("X-Idempotency-Key"); k != "" {
				seen += " key=" + k
			}
			u.seen = append(u.seen, seen)
			u.mu.Unlock()
			if n == 1 {
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				continue
			}
			switch mode {
			case "reset":
				_ = c.(*net.TCPConn).SetLinger(0)
			case "halfhead":
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Le")
				_ = c.(*net.TCPConn).SetLinger(0)
			}
			return
		}
	})
	return u
}

func (u *secondRequestUp) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...)
}

// TestReplayOnlyOnAReusedConnection: with retries: 0, a body-less GET whose
// reused keep-alive connection the upstream closes or resets before any
// byte of an answer is sent once more on a new connection, on both
// forwarders (net/http's Transport does it, and so must the fast path):
// the client gets 200 and the target saw the GET twice. A POST there, an
// answer begun, or the same close on a new connection (the target's own
// answer to this request) is not sent again: the fast path used to send
// every such GET twice, so a target dropping a request saw each attempt
// twice, past retries and retryBudget.
func TestReplayOnlyOnAReusedConnection(t *testing.T) {
	cases := []struct {
		mode, method string
		key          string   // an idempotency key field the request carries, body-less
		want         int      // the second request's status
		seen         []string // what the target read, in order
	}{
		{"close", "GET", "", 200, []string{"GET /a", "GET /b", "GET /b"}},
		{"reset", "GET", "", 200, []string{"GET /a", "GET /b", "GET /b"}},
		{"close", "HEAD", "", 200, []string{"GET /a", "HEAD /b", "HEAD /b"}},
		{"halfhead", "GET", "", 502, []string{"GET /a", "GET /b"}},
		{"close", "POST", "", 502, []string{"GET /a", "POST /b"}},
		// net/http's Transport takes a body-less request with one of these
		// keys for idempotent and sends it again (the §9 audit: a POST
		// reached its target twice on the standard path); SPEC §9 sends a
		// POST or PATCH that was sent once only, and both forwarders
		// replay the same methods.
		{"reset", "POST", "Idempotency-Key", 502, []string{"GET /a", "POST /b key=k1"}},
		{"reset", "POST", "X-Idempotency-Key", 502, []string{"GET /a", "POST /b key=k1"}},
		{"close", "PATCH", "Idempotency-Key", 502, []string{"GET /a", "PATCH /b key=k1"}},
		{"close", "PUT", "Idempotency-Key", 502, []string{"GET /a", "PUT /b key=k1"}}, // as the fast path (retries: 0)
	}
	for _, fwd := range []string{"fast", "standard"} {
		for _, c := range cases {
			t.Run(fwd+"/"+c.mode+"/"+c.method+"/"+c.key, func(t *testing.T) {
				up := newSecondRequestUp(t, c.mode)
				gw, _, _ := retryGateway(t, fwd, 0, "http://"+up.ln.Addr().String())
				if st, _ := send(t, "GET", gw+"/a", "", false); st != 200 {
					t.Fatalf("GET /a: %d", st)
				}
				body := ""
				if c.method == "POST" && c.key == "" {
					body = "order=1"
				}
				st := 0
				if c.key == "" {
					st, _ = send(t, c.method, gw+"/b", body, false)
				} else {
					req, _ := http.NewRequest(c.method, gw+"/b", nil)
					req.Header.Set(c.key, "k1")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					st = resp.StatusCode
				}
				if st != c.want {
					t.Errorf("%s /b: %d, want %d", c.method, st, c.want)
				}
				if got := up.requests(); !slices.Equal(got, c.seen) {
					t.Errorf("the target read %q, want %q", got, c.seen)
				}
			})
		}
	}
}

// TestNoReplayOnANewConnection: a target that closes every connection
// under its first request, unanswered, sees each attempt once: retries: 0
// sends the GET once, retries: 2 three times.
func TestNoReplayOnANewConnection(t *testing.T) {
	for _, fwd := range []string{"fast", "standard"} {
		for _, retries := range []int{0, 2} {
			up := newCountingUp(t, "reset")
			gw, _, _ := retryGateway(t, fwd, retries, up.url())
			if st, _ := send(t, "GET", gw+"/x", "", false); st != 502 {
				t.Errorf("%s, retries %d: %d, want 502", fwd, retries, st)
			}
			if n := up.count("GET"); n != retries+1 {
				t.Errorf("%s, retries %d: the target read the GET %d times, want %d", fwd, retries, n, retries+1)
			}
		}
	}
}

// TestReplayOnceAcrossAPool: a target that drops one request on whatever
// connection it comes (reads it, then resets: a request that kills its
// worker) sees it twice per attempt however many pooled connections the
// gateway holds to it: the replay dials a new connection. Before, each
// pooled connection took it in turn, uncounted as retries: 9 sends on the
// fast path, one per connection and one more on the standard.
func TestReplayOnceAcrossAPool(t *testing.T) {
	const pooled = 10
	for _, fwd := range []string{"fast", "standard"} {
		for _, retries := range []int{0, 2} {
			var mu sync.Mutex
			dropped := 0
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/drop" {
					time.Sleep(100 * time.Millisecond) // so that the warm-up holds pooled connections at once
					io.WriteString(w, "ok")
					return
				}
				mu.Lock()
				dropped++
				mu.Unlock()
				c, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					_ = c.(*net.TCPConn).SetLinger(0)
					c.Close()
				}
			}))
			gw, _, _ := retryGateway(t, fwd, retries, up.URL)
			var wg sync.WaitGroup
			for range pooled {
				wg.Go(func() {
					if st, _ := send(t, "GET", gw+"/warm", "", false); st != 200 {
						t.Errorf("%s: warm-up GET: %d", fwd, st)
					}
				})
			}
			wg.Wait()
			if st, _ := send(t, "GET", gw+"/drop", "", false); st != 502 {
				t.Errorf("%s, retries %d: %d, want 502", fwd, retries, st)
			}
			mu.Lock()
			// The first attempt on a pooled connection and its replay on
			// a new one; each retry on a new connection, not replayed.
			if want := 2 + retries; dropped != want {
				t.Errorf("%s, retries %d, %d connections pooled: the target read the GET %d times, want %d", fwd, retries, pooled, dropped, want)
			}
			mu.Unlock()
			up.Close()
		}
	}
}
