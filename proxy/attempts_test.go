package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	ups "sluice/upstream"
)

// fakeTransport plays a script, one step per attempt of a request, and
// records what each attempt was given. It keeps send's contract
// (transport): an error before an answer writes nothing, a failure answer
// that p.mayDrop takes a retry for is dropped, any other answer is
// written to the client.
type fakeTransport struct {
	whole bool // keeps(): the fast path's transport keeps small bodies always

	mu     sync.Mutex
	script []step
	sent   []sentAttempt
	calls  map[*prepared]int // a request's attempts so far
	// hold, when set, makes every attempt after a request's first wait
	// for it to close (the budget case holds retries in flight); holding
	// counts those waiting.
	hold    chan struct{}
	holding int
}

// step is one attempt's fate; the zero step answers 200.
type step struct {
	err  error // no answer
	code int
}

type sentAttempt struct {
	target  int
	drop    bool // a failure answer, dropped (p.mayDrop)
	body    string
	refused bool // a connect failure: nothing was sent
}

func (f *fakeTransport) name() string                      { return "fake" }
func (f *fakeTransport) keeps() bool                       { return f.whole }
func (f *fakeTransport) bodyBuf(_ *prepared, n int) []byte { return make([]byte, n) }

func (f *fakeTransport) open(p *prepared) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[*prepared]int{}
	}
	f.calls[p] = 0
}

func (f *fakeTransport) close(p *prepared) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.calls, p)
}

func (f *fakeTransport) send(p *prepared) (int, error) {
	f.mu.Lock()
	n := f.calls[p]
	f.calls[p]++
	var s step
	if n < len(f.script) {
		s = f.script[n]
	}
	if n == 0 && p.r.Header.Get("X-Fake-Code") == "503" {
		s = step{code: 503}
	}
	hold := n > 0 && f.hold != nil
	if hold {
		f.holding++
	}
	f.mu.Unlock()
	if hold {
		<-f.hold
	}
	body := string(p.body)
	_, refused := s.err.(*connectError)
	if p.body == nil && !p.ex.try.kept && !refused {
		b, _ := io.ReadAll(p.r.Body) // streamed: what was sent cannot be sent again
		body = string(b)
	}
	if s.err == nil && s.code == 0 {
		s.code = http.StatusOK
	}
	drop := s.err == nil && ups.FailureStatus(s.code) && p.mayDrop(s.code)
	f.mu.Lock()
	f.sent = append(f.sent, sentAttempt{target: p.target, drop: drop, body: body, refused: refused})
	f.mu.Unlock()
	switch {
	case s.err != nil:
		return 0, s.err
	case drop:
		return s.code, errDropped
	}
	p.ex.WriteHeader(s.code)
	_, _ = io.WriteString(p.ex, "answer")
	return s.code, nil
}

// fakeForwarder puts the fake transport under the attempts loop, where a
// route's fast or standard forwarder is.
type fakeForwarder struct {
	rt *route
	tr *fakeTransport
}

func (f fakeForwarder) forward(ex *exchange, r *http.Request) {
	f.rt.attempts(ex, r, f.tr, zerolog.Nop())
}
func (f fakeForwarder) name() string { return "fake" }

// stillClock is a Clock whose time moves only when a test moves it.
type stillClock struct{ now int64 }

func (c *stillClock) Now() int64                                      { return c.now }
func (c *stillClock) Sleep(ctx context.Context, _ time.Duration) bool { return ctx.Err() == nil }

// countingObserver counts what the route's statistics saw.
type countingObserver struct {
	mu          sync.Mutex
	pass, error int
}

func (o *countingObserver) Pass(time.Duration) { o.mu.Lock(); o.pass++; o.mu.Unlock() }
func (o *countingObserver) Error(time.Duration) {
	o.mu.Lock()
	o.error++
	o.mu.Unlock()
}
func (o *countingObserver) Block(string, time.Duration) {}
func (o *countingObserver) DryRun()                     {}
func (o *countingObserver) TooLarge()                   {}

// policyGateway serves /* on an upstream of two targets with two retries
// (passive ejection off) and a qps rule of 2, its routes forwarding through
// tr on the given path.
func policyGateway(t *testing.T, path string, tr *fakeTransport) (*Gateway, *countingObserver, *stillClock) {
	t.Helper()
	cfg, err := config.Parse("policy.yaml", []byte(fmt.Sprintf(`
upstreams:
  up:
    targets: ["http://127.0.0.1:9", "http://127.0.0.2:9"]
    retries: 2
    passive: {consecutiveFailures: 0}
routes:
  - path: /*
    upstream: up
    resource: r
    forwarder: %s
flowRules:
  - resource: r
    count: 2
`, path)))
	if err != nil {
		t.Fatal(err)
	}
	return fakeGateway(t, cfg, tr)
}

// fakeGateway loads cfg on a still clock, with every route's forwarders
// sending through tr.
func fakeGateway(t *testing.T, cfg *config.Config, tr *fakeTransport) (*Gateway, *countingObserver, *stillClock) {
	t.Helper()
	obs, clock := &countingObserver{}, &stillClock{now: int64(time.Hour)}
	g := New(Deps{Log: zerolog.Nop(), Clock: clock, Observer: func(string) Observer { return obs }})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	for _, rt := range g.Current().router.any.everyRoute() {
		fwd := fakeForwarder{rt, tr}
		rt.std = fwd
		if rt.fast != nil {
			rt.fast = fwd
		}
	}
	return g, obs, clock
}

var (
	errRefused = &connectError{syscall.ECONNREFUSED}
	errReset   = fmt.Errorf("read: %w", syscall.ECONNRESET)
)

// TestForwardingPolicy is the attempts loop's policy, once, on a fake
// transport, for both paths (the fast one keeps small bodies always, the
// standard one only to retry them): what is sent again, to which target,
// with which body, what the client gets, what the upstream pool is told
// of every attempt, and that the rules count the client's request once.
func TestForwardingPolicy(t *testing.T) {
	small, big := strings.Repeat("s", 100), strings.Repeat("b", fastBodyCap+1)
	cases := []struct {
		name, method, body string
		script             []step
		status             int
		attempts           int
		drops              []bool // each attempt's answer dropped for a retry; nil: not checked
		failed             int    // attempts reported as failures
	}{
		{name: "connect refused GET", method: "GET", script: []step{{err: errRefused}}, status: 200, attempts: 2, failed: 1},
		{name: "connect refused POST", method: "POST", body: small, script: []step{{err: errRefused}}, status: 200, attempts: 2, failed: 1},
		{name: "connect refused big POST", method: "POST", body: big, script: []step{{err: errRefused}}, status: 200, attempts: 2, failed: 1},
		{name: "reset GET", method: "GET", script: []step{{err: errReset}}, status: 200, attempts: 2, failed: 1},
		{name: "reset PUT kept", method: "PUT", body: small, script: []step{{err: errReset}}, status: 200, attempts: 2, failed: 1},
		{name: "reset POST", method: "POST", body: small, script: []step{{err: errReset}}, status: 502, attempts: 1, failed: 1},
		{name: "reset PUT streamed", method: "PUT", body: big, script: []step{{err: errReset}}, status: 502, attempts: 1, failed: 1},
		{name: "timeout GET", method: "GET", script: []step{{err: context.DeadlineExceeded}}, status: 504, attempts: 1, failed: 1},
		{name: "502 GET", method: "GET", script: []step{{code: 502}}, status: 200, attempts: 2, drops: []bool{true, false}, failed: 1},
		{name: "503 then 504 GET", method: "GET", script: []step{{code: 503}, {code: 504}}, status: 200, attempts: 3, drops: []bool{true, true, false}, failed: 2},
		{name: "504 every time GET", method: "GET", script: []step{{code: 504}, {code: 504}, {code: 504}}, status: 504, attempts: 3, drops: []bool{true, true, false}, failed: 3},
		{name: "503 POST", method: "POST", body: small, script: []step{{code: 503}}, status: 503, attempts: 1, drops: []bool{false}, failed: 1},
		{name: "503 PUT streamed", method: "PUT", body: big, script: []step{{code: 503}}, status: 503, attempts: 1, drops: []bool{false}, failed: 1},
		{name: "500 GET", method: "GET", script: []step{{code: 500}}, status: 500, attempts: 1, drops: []bool{false}, failed: 0},
		{name: "retries spent", method: "GET", script: []step{{err: errReset}, {err: errRefused}, {err: errReset}}, status: 502, attempts: 3, failed: 3},
	}
	for _, path := range []string{"fast", "standard"} {
		for _, c := range cases {
			t.Run(path+"/"+c.name, func(t *testing.T) {
				tr := &fakeTransport{whole: path == "fast", script: c.script}
				g, obs, clock := policyGateway(t, path, tr)
				var body io.Reader
				if c.body != "" {
					body = strings.NewReader(c.body)
				}
				w := httptest.NewRecorder()
				g.ServeHTTP(w, httptest.NewRequest(c.method, "/x", body))
				if w.Code != c.status {
					t.Errorf("status %d, want %d", w.Code, c.status)
				}
				// The gateway's own answer when the last attempt got none.
				last := step{}
				if c.attempts <= len(c.script) {
					last = c.script[c.attempts-1]
				}
				if want := map[int][]byte{502: bodyBadGateway, 504: bodyTimeout}[c.status]; last.err != nil && w.Body.String() != string(want) {
					t.Errorf("body %q, want %q", w.Body, want)
				}
				if len(tr.sent) != c.attempts {
					t.Fatalf("%d attempts, want %d: %+v", len(tr.sent), c.attempts, tr.sent)
				}
				for i, a := range tr.sent {
					if i > 0 && a.target == tr.sent[i-1].target {
						t.Errorf("attempt %d went to target %d again, while another was untried or just tried", i, a.target)
					}
					if !a.refused && a.body != c.body {
						t.Errorf("attempt %d sent %d body bytes, want %d", i, len(a.body), len(c.body))
					}
					if c.drops != nil && a.drop != c.drops[i] {
						t.Errorf("attempt %d: drop %v, want %v", i, a.drop, c.drops[i])
					}
				}
				// The upstream pool was told of every attempt once: sent,
				// failed, and none left in flight.
				var sent, failed float64
				for _, ts := range g.Upstreams(clock.now)[0].Targets {
					sent += ts.RequestsPerSecond
					failed += ts.ErrorsPerSecond
					if ts.InFlight != 0 {
						t.Errorf("target %s: %d attempts still in flight", ts.URL, ts.InFlight)
					}
				}
				if int(sent) != c.attempts || int(failed) != c.failed {
					t.Errorf("upstream pool: %v attempts, %v failed; want %d, %d", sent, failed, c.attempts, c.failed)
				}
				// The client's request counted once by the rules and the
				// statistics, whatever its attempts: the qps rule of 2
				// takes one more, then refuses.
				if obs.pass+obs.error != 1 {
					t.Errorf("statistics: %d passes, %d errors; want one request", obs.pass, obs.error)
				}
				tr.script = nil
				for i, want := range []int{200, 429} {
					w := httptest.NewRecorder()
					g.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
					if w.Code != want {
						t.Errorf("request %d after: status %d, want %d", i+2, w.Code, want)
					}
				}
			})
		}
	}
}

// TestForwardingPolicyBudget: with the retries in flight at the budget
// (3, the floor), a failed attempt is not sent again, on both paths: a
// reset is answered 502, a 503 reaches the client as the target sent it.
func TestForwardingPolicyBudget(t *testing.T) {
	for _, path := range []string{"fast", "standard"} {
		t.Run(path, func(t *testing.T) {
			hold := make(chan struct{})
			tr := &fakeTransport{whole: path == "fast", hold: hold, script: []step{{err: errReset}}}
			g, _, _ := policyGateway(t, path, tr)
			// The qps rule of 2 would refuse the held requests: lift it.
			for _, rt := range g.Current().router.any.everyRoute() {
				rt.guards.n = 0
			}
			var wg sync.WaitGroup
			codes := make(chan int, 3)
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w := httptest.NewRecorder()
					g.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
					codes <- w.Code
				}()
			}
			// Three first attempts reset, three retries held in flight.
			deadline := time.Now().Add(10 * time.Second)
			for {
				tr.mu.Lock()
				n := tr.holding
				tr.mu.Unlock()
				if n == 3 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d retries in flight, want 3", n)
				}
				time.Sleep(time.Millisecond)
			}
			w := httptest.NewRecorder()
			g.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
			answered := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/x", nil)
			req.Header.Set("X-Fake-Code", "503")
			g.ServeHTTP(answered, req)
			close(hold)
			wg.Wait()
			close(codes)
			if w.Code != http.StatusBadGateway {
				t.Errorf("a reset over the budget: status %d, want 502 (not retried)", w.Code)
			}
			if answered.Code != http.StatusServiceUnavailable {
				t.Errorf("a 503 over the budget: status %d, want the target's 503 (not retried, not dropped)", answered.Code)
			}
			for c := range codes {
				if c != 200 {
					t.Errorf("a retried request: status %d, want 200", c)
				}
			}
			if len(tr.sent) != 8 {
				t.Errorf("%d attempts, want 8 (3 requests twice, two once)", len(tr.sent))
			}
		})
	}
}
