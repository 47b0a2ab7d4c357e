package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// wallClock is real time that records every wait the gateway asks for.
type wallClock struct {
	base   time.Time
	mu     sync.Mutex
	sleeps []time.Duration
	queued chan struct{} // one signal a Sleep call
}

func (c *wallClock) Now() int64 { return int64(time.Since(c.base)) }

func (c *wallClock) Sleep(ctx context.Context, d time.Duration) bool {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.mu.Unlock()
	select {
	case c.queued <- struct{}{}:
	default:
	}
	wait, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	<-wait.Done()
	return ctx.Err() == nil
}

// throttleServer serves g on a real loopback listener, with sendTimeout's
// Listener and ConnContext as the gateway's traffic servers have them; a
// throttle rule of 1 per interval with a queue of maxQueueingTimeMs guards
// /slow. Each request's method arrives on returned once served.
func throttleServer(t *testing.T, upURL string, interval, maxQueue int) (base string, clock *wallClock, returned chan string) {
	t.Helper()
	cfg, err := config.Parse("queue.yaml", []byte(fmt.Sprintf(`
upstreams:
  up: {targets: [%q]}
routes:
  - path: /slow
    upstream: up
    resource: slow
flowRules:
  - resource: slow
    count: 1
    statIntervalMs: %d
    controlBehavior: throttle
    maxQueueingTimeMs: %d
`, upURL, interval, maxQueue)))
	if err != nil {
		t.Fatal(err)
	}
	clock = &wallClock{base: time.Now(), queued: make(chan struct{}, 1)}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: clock})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	returned = make(chan string, 4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() { returned <- r.Method }() // also when the gateway cuts a request whose client left
			g.ServeHTTP(w, r)
		}),
		ConnContext: g.ConnContext,
	}
	go srv.Serve(g.Listener(ln))
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), clock, returned
}

// TestQueuedRequestWithUnreadBodyLeavesWhenClientCloses: a POST waiting in
// a throttle queue, its body not yet read, leaves the queue when its client
// hangs up, and gives its slot back, as a GET does (SPEC §3). net/http's
// context does not see that client leave: it watches the connection only
// once the body is read.
func TestQueuedRequestWithUnreadBodyLeavesWhenClientCloses(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the client's socket state is read with TCP_INFO, on Linux only")
	}
	var forwarded atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { forwarded.Add(1) }))
	t.Cleanup(up.Close)
	// One pass per 10 s: the first passes at once, the second waits 10 s.
	base, clock, returned := throttleServer(t, up.URL, 10000, 30000)
	resp, err := http.Get(base + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if m := <-returned; m != "GET" {
		t.Fatalf("%s returned, want the first GET", m)
	}

	// A POST whose 5-byte body never comes: queued behind the first pass.
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-clock.queued:
	case <-time.After(5 * time.Second):
		t.Fatal("the POST was not queued")
	}
	left := time.Now()
	c.Close()
	select {
	case m := <-returned:
		if m != "POST" {
			t.Fatalf("%s returned, want the POST", m)
		}
		t.Logf("the POST left the queue %v after its client closed", time.Since(left).Round(time.Millisecond))
	case <-time.After(5 * time.Second): // its turn is 10 s away
		t.Fatal("the POST stayed in the queue 5 s after its client closed")
	}
	if n := forwarded.Load(); n != 1 {
		t.Errorf("upstream saw %d requests, want 1 (the POST whose client left is not forwarded)", n)
	}

	// Its slot is free again: the next call waits for the first pass's
	// spacing (under 10 s), not for the POST's (20 s).
	select { // a signal the POST's last piece of waiting left
	case <-clock.queued:
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-clock.queued
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/slow", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("the next call did not end when its client left")
	}
	clock.mu.Lock()
	last := clock.sleeps[len(clock.sleeps)-1]
	clock.mu.Unlock()
	if last > 10*time.Second {
		t.Errorf("the next call was queued %v, want under 10s: the POST's slot was not given back", last)
	}
}

// TestQueuedRequestWithBodyWaitsItsTurn: a POST whose client stays waits
// its whole turn, in pieces, and is forwarded with its body.
func TestQueuedRequestWithBodyWaitsItsTurn(t *testing.T) {
	bodies := make(chan string, 2)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
	}))
	t.Cleanup(up.Close)
	base, clock, returned := throttleServer(t, up.URL, 300, 5000)
	start := time.Now()
	for _, body := range []string{"first", "second"} {
		resp, err := http.Post(base+"/slow", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d", body, resp.StatusCode)
		}
		<-returned
		if got := <-bodies; got != body {
			t.Errorf("upstream got %q, want %q", got, body)
		}
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("the second POST passed %v after the first, before its turn (300ms)", el)
	}
	clock.mu.Lock()
	defer clock.mu.Unlock()
	if len(clock.sleeps) == 0 {
		t.Error("the second POST was not queued")
	}
	for _, d := range clock.sleeps {
		if d > 50*time.Millisecond {
			t.Errorf("a piece of the wait was %v, want at most 50ms", d)
		}
	}
}
