package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// rulesGateway serves rules (a rules.yaml body) with a gateway of its own.
func rulesGateway(t *testing.T, rules string) *httptest.Server {
	t.Helper()
	srv, _ := rulesGatewayOf(t, rules)
	return srv
}

// rulesGatewayOf is rulesGateway, with the gateway.
func rulesGatewayOf(t *testing.T, rules string) (*httptest.Server, *proxy.Gateway) {
	t.Helper()
	cfg, err := config.Parse("rules.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv, g
}

// keyedCall sends method to url with X-Key: k and body (nil: none; a body
// of unknown length is sent chunked), and returns the status.
func keyedCall(t *testing.T, method, url string, body io.Reader) int {
	t.Helper()
	return keyedAnswer(t, method, url, body).StatusCode
}

// keyedAnswer is keyedCall's answer, its body read and closed.
func keyedAnswer(t *testing.T, method, url string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestFailureCountsOnlyTheUpstreamsAnswers: a countOn failure rule
// takes a token for the upstream's answers in failureStatuses only. A
// body over maxBodyBytes, found while it streams, is answered 413 by the
// gateway itself after the guards let the call in: that answer says
// nothing of the upstream (no failed login), so it costs nothing, as the
// gateway's 502/504 cost nothing. The upstream's own 413 does count, once:
// the next call is refused before the upstream. Both forwarders.
func TestFailureCountsOnlyTheUpstreamsAnswers(t *testing.T) {
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Query().Get("deny") == "1" {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer up.Close()
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			reached.Store(0)
			srv := rulesGateway(t, fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
routes:
  - path: /login
    upstream: up
    resource: login
    forwarder: %s
    maxBodyBytes: 16
paramRules:
  - resource: login
    param: header:X-Key
    count: 1
    durationSec: 3600
    countOn: failure
    failureStatuses: ["4xx"]
`, up.URL, fwd))
			// Chunked, so the cap is found while the body streams, after
			// the guards.
			big := struct{ io.Reader }{strings.NewReader(strings.Repeat("x", 4096))}
			if got := keyedCall(t, "POST", srv.URL+"/login", big); got != http.StatusRequestEntityTooLarge {
				t.Fatalf("an over-cap body: %d, want the gateway's 413", got)
			}
			if got := keyedCall(t, "POST", srv.URL+"/login?deny=1", strings.NewReader("small")); got != http.StatusRequestEntityTooLarge {
				t.Fatalf("after the gateway's own 413: %d, want the upstream's 413 (the gateway's answer took the only token)", got)
			}
			if got := keyedCall(t, "POST", srv.URL+"/login", strings.NewReader("small")); got != http.StatusTooManyRequests {
				t.Fatalf("after the upstream's 413: %d, want 429", got)
			}
		})
	}
}

// TestFailureGatewayErrorsCostNothing: the gateway's own 502 (the
// upstream is down) is no answer of the upstream's: with failureStatuses
// ["5xx"] it takes no token, so a client is never locked out by an
// outage; the upstream's own 502 does take one.
func TestFailureGatewayErrorsCostNothing(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer bad.Close()
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			srv := rulesGateway(t, fmt.Sprintf(`
upstreams:
  down:
    targets: [%q]
  bad:
    targets: [%q]
routes:
  - { path: /down, upstream: down, resource: api, forwarder: %[3]s }
  - { path: /bad, upstream: bad, resource: api, forwarder: %[3]s }
paramRules:
  - resource: api
    param: header:X-Key
    count: 1
    durationSec: 3600
    countOn: failure
    failureStatuses: ["5xx"]
`, downURL, bad.URL, fwd))
			for i := range 3 {
				if got := keyedCall(t, "GET", srv.URL+"/down", nil); got != http.StatusBadGateway {
					t.Fatalf("call %d to a down upstream: %d, want the gateway's 502", i, got)
				}
			}
			if got := keyedCall(t, "GET", srv.URL+"/bad", nil); got != http.StatusBadGateway {
				t.Fatalf("the upstream's 502: %d", got)
			}
			if got := keyedCall(t, "GET", srv.URL+"/bad", nil); got != http.StatusTooManyRequests {
				t.Fatalf("after the upstream's own 502: %d, want 429", got)
			}
		})
	}
}

// TestCostHeaderSpellings: an upstream that writes the figure header
// in odd cases, on two lines, or with white space before the colon (RFC
// 9112 §5.1: a proxy removes it before forwarding; net/http keeps such a
// field under the name "X-Tokens-Used " and its writer drops it), is read
// and stripped alike on both forwarders: the figure charged is 6 (the
// higher of 4 and 6), so a key of 10 tokens passes twice (the second
// overdraws) and is refused the third time; the client never sees the
// figure, and gets another field so written under its name.
func TestCostHeaderSpellings(t *testing.T) {
	for _, tc := range []struct{ name, fields string }{
		{"cases", "x-tokens-used: 4\r\nX-TOKENS-USED: 6\r\n"},
		{"space before colon", "X-Tokens-Used : 6\r\nX-Other  : kept\r\n"},
	} {
		up := newRawUp(t, "HTTP/1.1 200 OK\r\n"+tc.fields+"Content-Length: 2\r\n\r\nok", false)
		for _, fwd := range []string{"standard", "fast"} {
			t.Run(tc.name+"/"+fwd, func(t *testing.T) {
				srv := costGateway(t, up.url(), fwd, false)
				for i, want := range []int{200, 200, 429} {
					resp := keyedAnswer(t, "GET", srv.URL+"/chat", nil)
					if resp.StatusCode != want {
						t.Fatalf("call %d: %d, want %d", i, resp.StatusCode, want)
					}
					for k, v := range resp.Header {
						if strings.EqualFold(strings.TrimSpace(k), "X-Tokens-Used") {
							t.Fatalf("call %d: the client got %s: %q", i, k, v)
						}
					}
					if other := resp.Header.Get("X-Other"); want == 200 && strings.Contains(tc.fields, "X-Other") && other != "kept" {
						t.Fatalf("call %d: X-Other %q, want kept (header %v)", i, other, resp.Header)
					}
				}
			})
		}
	}
}

// TestSpacedFieldsAreMendedBeforeHopByHop: a field written with white
// space before the colon is mended before the connection's own fields are
// removed, on both forwarders: "Connection : X-Secret" takes X-Secret with
// it, and Keep-Alive, Upgrade and Proxy-Connection so written do not
// reach the client. A framing field so written (a second Content-Length,
// or one net/http did not frame the body by) is a broken answer: 502,
// never a second length passed on.
func TestSpacedFieldsAreMendedBeforeHopByHop(t *testing.T) {
	hop := newRawUp(t, "HTTP/1.1 200 OK\r\nConnection : X-Secret\r\nX-Secret: s\r\nKeep-Alive : timeout=9\r\n"+
		"Upgrade : evil\r\nProxy-Connection : x\r\nX-Kept : yes\r\nContent-Length: 2\r\n\r\nok", false)
	twice := newRawUp(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length : 100\r\n\r\nok", false)
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			resp, err := http.Get(costGateway(t, hop.url(), fwd, false).URL + "/chat")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("X-Kept") != "yes" {
				t.Fatalf("%d, X-Kept %q; want 200 with the mended field", resp.StatusCode, resp.Header.Get("X-Kept"))
			}
			for k := range resp.Header {
				switch strings.TrimSpace(k) {
				case "X-Secret", "Keep-Alive", "Upgrade", "Proxy-Connection":
					t.Errorf("the client got %s: %q", k, resp.Header[k])
				}
			}
			resp, err = http.Get(costGateway(t, twice.url(), fwd, false).URL + "/chat")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 502 || len(resp.Header["Content-Length"]) > 1 {
				t.Errorf("a second, spaced Content-Length: %d with %q, want 502", resp.StatusCode, resp.Header["Content-Length"])
			}
		})
	}
}

// TestTrailersOnlyFigureIsTrailing: a gRPC call that fails before any
// message is answered trailers-only, its trailing metadata in the head
// with grpc-status (as grpc-go's own server sends it); a figure there is
// trailing metadata, not read, as the same figure sent after a head of its
// own is not: each call costs acquireCount (1), so all three pass on a key
// of 10 where a figure of 6 read would refuse the third; the client never
// sees the figure. A plain HTTP answer with grpc-status (a transcoder's
// JSON error) is no gRPC answer: its figure is read.
func TestTrailersOnlyFigureIsTrailing(t *testing.T) {
	answer := "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nGrpc-Status: 14\r\nX-Tokens-Used: 6\r\nContent-Length: 0\r\n\r\n"
	grpc := newRawUp(t, fmt.Sprintf(answer, "application/grpc+proto"), false)
	// A transcoder's JSON error with grpc-status is no gRPC answer: read.
	plain := newRawUp(t, fmt.Sprintf(answer, "application/json"), false)
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			srv := costGateway(t, plain.url(), fwd, false)
			for i, want := range []int{200, 200, 429} {
				if st := keyedCall(t, "POST", srv.URL+"/chat", nil); st != want {
					t.Fatalf("plain answer, call %d: %d, want %d (a figure of 6 read)", i, st, want)
				}
			}
			srv = costGateway(t, grpc.url(), fwd, false)
			for i := range 3 {
				resp := keyedAnswer(t, "POST", srv.URL+"/chat", nil)
				if resp.StatusCode != 200 || resp.Header.Get("X-Tokens-Used") != "" {
					t.Fatalf("call %d: %d with figure %q, want 200 without it", i, resp.StatusCode, resp.Header.Get("X-Tokens-Used"))
				}
			}
		})
	}
}

// TestRetriedAnswerCostsNothing: an answer dropped for a retry (a
// 503 with a figure of 9) never reached the client and costs nothing;
// the answer the client got (200, figure 1) is charged. With 10 tokens,
// five calls pass; had the dropped figures been charged, the second would
// have been refused. Both forwarders.
func TestRetriedAnswerCostsNothing(t *testing.T) {
	var hits atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1)%2 == 1 {
			w.Header().Set("X-Tokens-Used", "9")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("X-Tokens-Used", "1")
		w.Write([]byte("ok"))
	})
	a, b := httptest.NewServer(h), httptest.NewServer(h)
	defer a.Close()
	defer b.Close()
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			hits.Store(0)
			srv := rulesGateway(t, fmt.Sprintf(`
upstreams:
  up:
    targets: [%q, %q]
    retries: 1
routes:
  - { path: /chat, upstream: up, resource: chat, forwarder: %s }
paramRules:
  - resource: chat
    param: header:X-Key
    count: 10
    durationSec: 3600
    countOn: "responseHeader:X-Tokens-Used"
`, a.URL, b.URL, fwd))
			for i := range 5 {
				if got := keyedCall(t, "GET", srv.URL+"/chat", nil); got != http.StatusOK {
					t.Fatalf("call %d: %d, want 200 (upstream hits %d)", i, got, hits.Load())
				}
			}
			if hits.Load() != 10 {
				t.Fatalf("the upstreams were hit %d times, want 10: the test did not retry", hits.Load())
			}
		})
	}
}

// TestCostTrailerSpellings: a figure sent as a trailer in lower case
// (announced so, or not announced) does not reach the client on either
// forwarder, and is not charged: the header-less answers cost acquireCount
// (1), so ten calls pass and the eleventh is refused.
func TestCostTrailerSpellings(t *testing.T) {
	for _, announce := range []string{"Trailer: x-tokens-used\r\n", ""} {
		up := newRawUp(t, "HTTP/1.1 200 OK\r\n"+announce+"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nx-tokens-used: 3\r\nx-other: 1\r\n\r\n", false)
		for _, fwd := range []string{"standard", "fast"} {
			t.Run(fmt.Sprintf("%s/announced=%v", fwd, announce != ""), func(t *testing.T) {
				srv := costGateway(t, up.url(), fwd, false)
				for i := range 11 {
					req, _ := http.NewRequest("GET", srv.URL+"/chat", nil)
					req.Header.Set("X-Key", "k")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := io.ReadAll(resp.Body); err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					want := 200
					if i == 10 {
						want = 429
					}
					if resp.StatusCode != want {
						t.Fatalf("call %d: %d, want %d", i, resp.StatusCode, want)
					}
					// An announced name shows in resp.Trailer with no value
					// (the gateway passes the Trailer line on): the figure
					// is what must not reach the client.
					for _, h := range []http.Header{resp.Header, resp.Trailer} {
						for k, v := range h {
							if strings.EqualFold(k, "X-Tokens-Used") && len(v) > 0 {
								t.Fatalf("call %d: the client got %s: %q", i, k, v)
							}
						}
					}
				}
			})
		}
	}
}

// TestDebtBlockHeaders: a key overdrawn by a cost figure is refused
// before the upstream with Retry-After and the RateLimit t both counting
// down to when its debt is paid and one token is back: 10 tokens an hour
// (one per 360 s), 8 then 5 spent leave a debt of 3, so a token is back in
// 4 x 360 s; r is 0. Both forwarders.
func TestDebtBlockHeaders(t *testing.T) {
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("X-Tokens-Used", r.URL.Query().Get("used"))
	}))
	defer up.Close()
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			reached.Store(0)
			srv := costGateway(t, up.URL, fwd, false)
			var resp *http.Response
			for _, used := range []string{"8", "5", "1"} {
				req, _ := http.NewRequest("GET", srv.URL+"/chat?used="+used, nil)
				req.Header.Set("X-Key", "k")
				var err error
				if resp, err = http.DefaultClient.Do(req); err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			if resp.StatusCode != http.StatusTooManyRequests || reached.Load() != 2 {
				t.Fatalf("in debt: %d after %d calls reached the upstream, want 429 after 2", resp.StatusCode, reached.Load())
			}
			if got := resp.Header.Get("Retry-After"); got != "1440" {
				t.Errorf("Retry-After %q, want 1440", got)
			}
			if got := resp.Header.Get("RateLimit"); !strings.Contains(got, ";r=0;t=1440;") {
				t.Errorf("RateLimit %q, want r=0 and t=1440", got)
			}
		})
	}
}

// TestLockoutHoldsParallelGuesses: 20 login attempts of one address
// sent at once against 3 failures per 10 minutes: 3 reach the upstream,
// the other 17 are refused at once (429) while those 3 are still
// answering; the 3 then fail (401), and the address stays locked out.
// Both forwarders.
func TestLockoutHoldsParallelGuesses(t *testing.T) {
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			var reached atomic.Int64
			release := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached.Add(1)
				<-release
				w.WriteHeader(http.StatusUnauthorized)
			}))
			defer up.Close()
			defer func() {
				select {
				case <-release:
				default:
					close(release)
				}
			}()
			srv := rulesGateway(t, fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
routes:
  - { path: /login, upstream: up, resource: login, forwarder: %s }
paramRules:
  - resource: login
    param: header:X-Key
    count: 3
    durationSec: 600
    countOn: failure
    failureStatuses: [401]
`, up.URL, fwd))
			codes := make(chan int, 20)
			for range 20 {
				go func() {
					req, _ := http.NewRequest("POST", srv.URL+"/login", nil)
					req.Header.Set("X-Key", "k")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						codes <- 0
						return
					}
					resp.Body.Close()
					codes <- resp.StatusCode
				}()
			}
			timeout := time.After(2 * time.Second)
			for refused := 0; refused < 17; {
				select {
				case c := <-codes:
					if c != http.StatusTooManyRequests {
						t.Fatalf("an attempt got %d while 3 were in flight, want 429", c)
					}
					refused++
				case <-timeout:
					t.Fatalf("%d of 20 parallel guesses refused, %d reached the upstream, in 2 s; want 17 and 3", refused, reached.Load())
				}
			}
			close(release)
			for range 3 {
				if c := <-codes; c != http.StatusUnauthorized {
					t.Fatalf("an attempt let in got %d, want the upstream's 401", c)
				}
			}
			if reached.Load() != 3 {
				t.Fatalf("%d guesses reached the upstream, want 3", reached.Load())
			}
			if got := keyedCall(t, "POST", srv.URL+"/login", nil); got != http.StatusTooManyRequests {
				t.Fatalf("after 3 failures: %d, want 429", got)
			}
		})
	}
}

// TestAnnouncedCostTrailerUnnamed: an upstream that announces its figure
// as a trailer (Trailer: x-tokens-used, x-other) has the figure's name
// taken out of the announcement the client gets, on both forwarders; the
// other trailer is still announced and delivered.
func TestAnnouncedCostTrailerUnnamed(t *testing.T) {
	up := newRawUp(t, "HTTP/1.1 200 OK\r\nTrailer: x-tokens-used, x-other\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nx-tokens-used: 3\r\nx-other: 1\r\n\r\n", false)
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			srv := costGateway(t, up.url(), fwd, false)
			req, _ := http.NewRequest("GET", srv.URL+"/chat", nil)
			req.Header.Set("X-Key", "k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			announced := make([]string, 0, len(resp.Trailer))
			for k := range resp.Trailer {
				announced = append(announced, k)
			}
			if _, err := io.ReadAll(resp.Body); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			for _, k := range announced {
				if strings.EqualFold(k, "X-Tokens-Used") {
					t.Fatalf("the client was told of the trailer %s (announced %v)", k, announced)
				}
			}
			if got := resp.Trailer.Get("X-Other"); got != "1" {
				t.Fatalf("X-Other trailer %q, want 1 (announced %v)", got, announced)
			}
		})
	}
}

// TestFailureCountsAnAnswerWhoseBodyBroke: an upstream's 401 whose body
// broke after its status line reached the client told the client the
// password was wrong, yet it cost a countOn failure rule nothing: the
// broken exchange was recorded as no answer (status 0). A guesser behind
// such an upstream was never locked out. The failure rules now judge the
// status the client read; a breaker still counts the exchange as broken.
// Both forwarders.
func TestFailureCountsAnAnswerWhoseBodyBroke(t *testing.T) {
	// A body long enough that its start reaches the client before the
	// upstream breaks off.
	up := newRawUp(t, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 1000000\r\n\r\n"+strings.Repeat("x", 256<<10), true)
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			srv, _, settled := lockoutGateway(t, up.url(), "    retries: 0", fwd, "login")
			for i, want := range []int{401, 401, 429} {
				if got := keyedCall(t, "POST", srv.URL+"/login", strings.NewReader("pw")); got != want {
					t.Fatalf("guess %d: %d, want %d", i, got, want)
				}
				// The client sees the broken body before the gateway
				// settles the guess: the next guess waits for the charge.
				settled()
			}
		})
	}
}

// lockoutGateway serves a login lockout (2 failed logins, 401, per X-Key
// an hour) of upstream target through forwarder fwd, on the route's
// resource (login) or on the API group of /login (logins); settled waits
// until the gateway has settled every call: a call holds its token until
// its handler returns, which a client's leaving does not wait for.
func lockoutGateway(t *testing.T, target, upstreamExtra, fwd, on string) (srv *httptest.Server, g *proxy.Gateway, settled func()) {
	t.Helper()
	_, g = rulesGatewayOf(t, fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
%s
routes:
  - path: /login
    upstream: up
    resource: login
    forwarder: %s
apiGroups:
  - name: logins
    match: [{ exact: /login }]
paramRules:
  - resource: %s
    param: header:X-Key
    count: 2
    durationSec: 3600
    countOn: failure
    failureStatuses: [401]
`, target, upstreamExtra, fwd, on))
	var active atomic.Int64
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		active.Add(1)
		defer active.Add(-1)
		g.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	settled = func() {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); active.Load() != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the gateway never settled the calls")
			}
		}
	}
	return srv, g, settled
}

// TestFailureCountsAGuessItsClientHungUpOn: a client that hangs up once
// its guess has reached the upstream is charged for it, on both
// forwarders: the upstream judged the guess, the client only chose not to
// hear the verdict. Before, the standard forwarder (which a client picks
// with a chunked body, Accept: text/event-stream or an h2 stream without
// content-length) cancelled the upstream call and gave the token back, so
// a login lockout of 2 an hour let every hung-up guess through.
func TestFailureCountsAGuessItsClientHungUpOn(t *testing.T) {
	arrived := make(chan struct{}, 8)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select { // a slow password check; the client hangs up meanwhile
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer up.Close()
	// A group's rule too: the standard path notes a request's reaching
	// the upstream only for calls a failure rule counts (call.failures).
	for _, tc := range []struct{ fwd, on string }{{"standard", "login"}, {"fast", "login"}, {"standard", "logins"}} {
		t.Run(tc.fwd+"/"+tc.on, func(t *testing.T) {
			srv, _, settled := lockoutGateway(t, up.URL, "", tc.fwd, tc.on)
			for i := range 2 {
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/login", strings.NewReader("guess"))
				req.Header.Set("X-Key", "k")
				done := make(chan error, 1)
				go func() {
					resp, err := http.DefaultClient.Do(req)
					if err == nil {
						resp.Body.Close()
					}
					done <- err
				}()
				select {
				case <-arrived:
				case <-time.After(5 * time.Second):
					t.Fatalf("guess %d never reached the upstream", i+1)
				}
				cancel() // the client hangs up while the guess is judged
				if err := <-done; err == nil {
					t.Fatalf("guess %d: answered; want the client to have left first", i+1)
				}
			}
			settled()
			if got := keyedCall(t, "POST", srv.URL+"/login", strings.NewReader("guess")); got != http.StatusTooManyRequests {
				t.Errorf("after two guesses hung up on: %d, want 429 (both charged)", got)
			}
		})
	}
}

// TestCostPassShowsWhatTheFigureLeft: a pass's RateLimit fields were
// written as it entered, holding one token, so an answer that cost 10
// against 10 left showed r=9 and the client's next call was refused. The
// fields of an answer now count its figure: 10 tokens an hour (one per
// 360 s), figures 3, 1, 0 and 20 leave r 7, 6, 5 (a figure of 0 gives its
// held token back after the answer: not shown) and 0, the last with t
// counting down to when its debt (capped at one bucket) is paid and a
// token is back: 2,160 s, what the next call's Retry-After says. Both
// forwarders.
func TestCostPassShowsWhatTheFigureLeft(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Tokens-Used", r.URL.Query().Get("used"))
	}))
	defer up.Close()
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			srv := costGateway(t, up.URL, fwd, false)
			call := func(used string) *http.Response {
				req, _ := http.NewRequest("GET", srv.URL+"/chat?used="+used, nil)
				req.Header.Set("X-Key", "k")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp
			}
			for _, step := range []struct{ used, want string }{
				{"3", ";r=7;t=0;"}, {"1", ";r=6;t=0;"}, {"0", ";r=5;t=0;"}, {"20", ";r=0;t=2160;"},
			} {
				resp := call(step.used)
				if got := resp.Header.Get("RateLimit"); resp.StatusCode != 200 || !strings.Contains(got, step.want) {
					t.Errorf("figure %s: %d, RateLimit %q, want 200 and %s", step.used, resp.StatusCode, got, step.want)
				}
			}
			resp := call("1")
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2160" {
				t.Errorf("after the debt: %d, Retry-After %q, want 429 and 2160", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		})
	}
}
