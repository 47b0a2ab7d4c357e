package proxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// fakeClock is a synthetic Clock: time moves only when a test advances it or
// a throttled call waits (the wait passes at once, unless the request's
// context has ended: the client left while queued).
type fakeClock struct {
	now   atomic.Int64
	mu    sync.Mutex
	slept []time.Duration
}

func (c *fakeClock) Now() int64 { return c.now.Load() }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) bool {
	c.mu.Lock()
	c.slept = append(c.slept, d)
	c.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	c.now.Add(int64(d))
	return true
}

func (c *fakeClock) advance(d time.Duration) { c.now.Add(int64(d)) }

func (c *fakeClock) waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}

// stubUpstream answers every forwarded request in process with status,
// which a test may change between requests, and counts them.
type stubUpstream struct {
	status atomic.Int32
	calls  atomic.Int32
}

func (u *stubUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	u.calls.Add(1)
	return &http.Response{StatusCode: int(u.status.Load()), Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")),
		ContentLength: 2, Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// clockedGateway serves rules (appended to one upstream and a route /item/{id}
// for resource item, origin from X-Origin) on the synthetic clock, through
// the standard forwarder and the stub upstream: no network and no sleeping.
func clockedGateway(t *testing.T, rules string) (*proxy.Gateway, *fakeClock, *stubUpstream) {
	t.Helper()
	return stubGateway(t, "origin:\n  from: header:X-Origin\n"+itemRoute+rules, nil)
}

// itemRoute is one upstream and the route /item/{id} for resource item.
const itemRoute = `
upstreams:
  up:
    targets: ["http://upstream.invalid"]
routes:
  - path: /item/{id}
    upstream: up
    resource: item
`

// stubGateway serves a whole rules file on the synthetic clock (at an
// instant aligned to every window), through the standard forwarder and the
// stub upstream answering 200; deps, if not nil, changes the gateway's
// dependencies first (another Transport, an observer).
func stubGateway(t *testing.T, rules string, deps func(*proxy.Deps)) (*proxy.Gateway, *fakeClock, *stubUpstream) {
	t.Helper()
	cfg, err := config.Parse("stub.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{}
	clock.advance(1000 * time.Second)
	up := &stubUpstream{}
	up.status.Store(200)
	d := proxy.Deps{Log: zerolog.Nop(), Clock: clock, Transport: up, Forwarder: "standard"}
	if deps != nil {
		deps(&d)
	}
	g := proxy.New(d)
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	return g, clock, up
}

// get is one request for /item/id from origin (""), with the status and the
// X-Sluice-Blocked and Retry-After headers the client got.
func get(g *proxy.Gateway, id, origin string) (status int, blocked, retry string) {
	return getCtx(context.Background(), g, id, origin)
}

func getCtx(ctx context.Context, g *proxy.Gateway, id, origin string) (status int, blocked, retry string) {
	req := httptest.NewRequestWithContext(ctx, "GET", "/item/"+id, nil)
	if origin != "" {
		req.Header.Set("X-Origin", origin)
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	return w.Code, w.Header().Get("X-Sluice-Blocked"), w.Header().Get("Retry-After")
}

// getLeft is get by a client that has left: it reports whether the
// gateway cut the request (serveLeft) rather than answer it.
func getLeft(g *proxy.Gateway, id string) (cut bool) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return serveLeft(g, httptest.NewRequestWithContext(ctx, "GET", "/item/"+id, nil))
}

// serveLeft serves r, whose client has gone, and reports whether the
// gateway cut it (http.ErrAbortHandler) rather than answer: net/http
// would send an empty 200 for a handler that returns having written
// nothing, and a client that only half-closed reads that as the answer.
func serveLeft(h http.Handler, r *http.Request) (cut bool) {
	return serveLeftTo(h, httptest.NewRecorder(), r)
}

// serveLeftTo is serveLeft with the writer given.
func serveLeftTo(h http.Handler, w http.ResponseWriter, r *http.Request) (cut bool) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			cut = true
		}
	}()
	h.ServeHTTP(w, r)
	return false
}

// req is one step of a guard test: advance the clock by after, then
// request id from origin and expect want ("" = 200, else the guard that
// blocks it) and, when given, the Retry-After seconds.
type req struct {
	after  time.Duration
	id     string
	origin string
	want   string
	retry  string
}

// flowTwoParamOne lets 2 calls a second to the resource and 1 per id.
const flowTwoParamOne = `
flowRules:
  - resource: item
    count: 2
paramRules:
  - resource: item
    param: path:id
    count: 1
`

func TestGuardsOnSyntheticTime(t *testing.T) {
	tests := []struct {
		name  string
		rules string
		steps []req
	}{
		// Window edges are the limiter's to test; here a window is over
		// once twice its length has passed.
		{"flow qps: the window refills", `
flowRules:
  - resource: item
    count: 2
`, []req{
			{id: "1"}, {id: "2"}, {id: "3", want: "flow"},
			{after: 500 * time.Millisecond, id: "4", want: "flow"},
			{after: 1500 * time.Millisecond, id: "5"}, {id: "6"}, {id: "7", want: "flow"},
		}},
		{"flow limitApp other: each origin on its own", `
flowRules:
  - resource: item
    limitApp: other
    count: 1
`, []req{
			{id: "1", origin: "a"}, {id: "1", origin: "a", want: "flow"},
			{id: "1", origin: "b"}, {id: "1", origin: strings.Repeat("c", 5000)},
			{id: "1", origin: strings.Repeat("c", 5000), want: "flow"},
			{after: 2 * time.Second, id: "1", origin: "a"},
		}},
		{"param: each value its own bucket", `
paramRules:
  - resource: item
    param: path:id
    count: 1
`, []req{
			{id: "a"}, {id: "a", want: "param", retry: "1"}, {id: "b"},
			{after: time.Second, id: "a"},
		}},
		{"a param block gives the flow pass back", flowTwoParamOne, []req{
			{id: "a"}, {id: "a", want: "param"}, {id: "a", want: "param"},
			{id: "b"}, {id: "c", want: "flow"},
		}},
		{"system maxQps comes first, and tells when to retry", `
system:
  maxQps: 2
flowRules:
  - resource: item
    count: 2
`, []req{
			{id: "1"}, {id: "2"}, {id: "3", want: "system", retry: "1"},
			{after: 2 * time.Second, id: "4"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, clock, _ := clockedGateway(t, tc.rules)
			for i, st := range tc.steps {
				clock.advance(st.after)
				status, blocked, retry := get(g, st.id, st.origin)
				want := 200
				if st.want != "" {
					want = 429
				}
				if status != want || blocked != st.want {
					t.Fatalf("step %d (%s): status %d blocked %q, want %d %q", i, st.id, status, blocked, want, st.want)
				}
				if st.retry != "" && retry != st.retry {
					t.Errorf("step %d: Retry-After %q, want %q", i, retry, st.retry)
				}
			}
		})
	}
}

// Every block counts in the resource's statistics, whichever guard made it:
// a system block, which the flow checker never entered, too.
func TestBlocksOfEveryGuardCounted(t *testing.T) {
	g, _, _ := clockedGateway(t, "system:\n  maxQps: 3\n"+flowTwoParamOne)
	for _, id := range []string{"a", "a", "b", "c", "d"} { // pass, param, pass, flow, system
		get(g, id, "")
	}
	st := g.Current().Flow.Stats(g.Now())
	if len(st) != 1 || st[0].Node.PassQps != 2 || st[0].Node.BlockQps != 3 {
		t.Errorf("stats %+v, want 2 passes and 3 blocks (param, flow, system)", st)
	}
}

// A throttle rule's wait is spent on the gateway's clock: queued calls are
// spaced by the rule, a client that leaves the queue is not forwarded, and
// its slot goes to the next call.
func TestThrottleWaitsOnTheClock(t *testing.T) {
	g, clock, up := clockedGateway(t, `
flowRules:
  - resource: item
    count: 10
    controlBehavior: throttle
    maxQueueingTimeMs: 500
`)
	// Each call in turn: the clock stands at the previous one's slot.
	for range 3 {
		if status, _, _ := get(g, "1", ""); status != 200 {
			t.Fatalf("status %d", status)
		}
	}
	want := []time.Duration{100 * time.Millisecond, 100 * time.Millisecond}
	if got := clock.waits(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("waits %v, want %v (the first call goes at once)", got, want)
	}

	// A client gone before its turn: not forwarded, and its slot (+100ms)
	// is the next call's.
	calls := up.calls.Load()
	if !getLeft(g, "1") {
		t.Error("the call of a client that left the queue was answered")
	}
	if up.calls.Load() != calls {
		t.Error("a call whose client left the queue was forwarded")
	}
	get(g, "1", "")
	if got := clock.waits(); got[len(got)-1] != 100*time.Millisecond {
		t.Errorf("after a client left the queue the next call waited %v, want its slot (100ms)", got[len(got)-1])
	}
}

// A breaker opens on failures, blocks for retryTimeoutMs, lets one probe
// through, and closes when the probe succeeds: minutes of a real breaker's
// life in an instant.
func TestBreakerOnTheClock(t *testing.T) {
	g, clock, up := clockedGateway(t, `
degradeRules:
  - resource: item
    strategy: errorCount
    threshold: 1
    minRequestAmount: 2
    statIntervalMs: 1000
    retryTimeoutMs: 5000
`)
	up.status.Store(500)
	for i := range 2 {
		if status, _, _ := get(g, "1", ""); status != 500 {
			t.Fatalf("failing call %d: status %d, want the upstream's 500", i, status)
		}
	}
	status, blocked, retry := get(g, "1", "")
	if status != 429 || blocked != "degrade" || retry != "5" {
		t.Fatalf("after 2 errors: %d %q Retry-After %q, want 429 degrade 5", status, blocked, retry)
	}
	clock.advance(4999 * time.Millisecond)
	if _, blocked, _ := get(g, "1", ""); blocked != "degrade" {
		t.Fatal("the breaker let a call through before retryTimeoutMs")
	}
	clock.advance(time.Millisecond)
	up.status.Store(200)
	if status, _, _ := get(g, "1", ""); status != 200 {
		t.Fatalf("the probe after retryTimeoutMs: status %d, want 200", status)
	}
	for i := range 3 {
		if status, blocked, _ := get(g, "1", ""); status != 200 {
			t.Fatalf("call %d after a good probe: %d %q, want the breaker closed", i, status, blocked)
		}
	}
}

// The breaker judges the upstream's answers by its errorStatuses: the
// gateway passes it the status, not its own idea of a failure.
func TestBreakerErrorStatusesOnTheClock(t *testing.T) {
	tests := []struct {
		statuses string // "" leaves the default (5xx)
		answer   int32
		trips    bool
	}{
		{"", 500, true},
		{"", 429, false},
		{"[429]", 429, true},
		{"[429]", 500, false},
		{`["5xx", 429]`, 429, true},
		{`["5xx", 429]`, 503, true},
		{`["5xx", 429]`, 404, false},
	}
	for _, tt := range tests {
		t.Run(tt.statuses+" "+http.StatusText(int(tt.answer)), func(t *testing.T) {
			rule := `
degradeRules:
  - resource: item
    strategy: errorCount
    threshold: 1
    minRequestAmount: 2
    retryTimeoutMs: 5000
`
			if tt.statuses != "" {
				rule += "    errorStatuses: " + tt.statuses + "\n"
			}
			g, _, up := clockedGateway(t, rule)
			up.status.Store(tt.answer)
			for i := range 2 {
				if status, _, _ := get(g, "1", ""); status != int(tt.answer) {
					t.Fatalf("call %d: status %d, want the upstream's %d", i, status, tt.answer)
				}
			}
			_, blocked, _ := get(g, "1", "")
			if got := blocked == "degrade"; got != tt.trips {
				t.Errorf("after 2 answers %d: blocked by the breaker %v, want %v", tt.answer, got, tt.trips)
			}
		})
	}
}
