package proxy_test

import (
	"context"
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

// queueClock is a synthetic Clock whose Sleep (a throttle queue's wait)
// blocks until the test ends the wait or the client leaves.
type queueClock struct {
	now      atomic.Int64
	sleeping chan struct{}
	wake     chan struct{}
}

func (c *queueClock) Now() int64 { return c.now.Load() }

func (c *queueClock) Sleep(ctx context.Context, d time.Duration) bool {
	c.sleeping <- struct{}{}
	select {
	case <-c.wake:
		c.now.Add(int64(d))
		return true
	case <-ctx.Done():
		return false
	}
}

// heldUpstream answers 200 at once, but holds a request to /held until the
// test lets it go: a request in flight for as long as the test needs.
type heldUpstream struct {
	calls   atomic.Int32 // requests forwarded
	holding chan struct{}
	letGo   chan struct{}
}

func (u *heldUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	u.calls.Add(1)
	if r.URL.Path == "/held" {
		u.holding <- struct{}{}
		<-u.letGo
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")),
		ContentLength: 2, Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// queueGateway serves /slow (a throttle rule of 1/s with a 10 s queue),
// /other and /held under system.maxConcurrency 1, on a queueClock.
func queueGateway(t *testing.T) (*proxy.Gateway, *queueClock, *heldUpstream) {
	t.Helper()
	cfg, err := config.Parse("queue.yaml", []byte(`
upstreams:
  up:
    targets: ["http://upstream.invalid"]
routes:
  - path: /slow
    upstream: up
    resource: slow
  - path: /other
    upstream: up
    resource: other
  - path: /held
    upstream: up
    resource: other
system:
  maxConcurrency: 1
flowRules:
  - resource: slow
    count: 1
    controlBehavior: throttle
    maxQueueingTimeMs: 10000
`))
	if err != nil {
		t.Fatal(err)
	}
	clock := &queueClock{sleeping: make(chan struct{}, 1), wake: make(chan struct{})}
	clock.now.Store(int64(1000 * time.Second))
	up := &heldUpstream{holding: make(chan struct{}, 1), letGo: make(chan struct{})}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: clock, Transport: up, Forwarder: "standard"})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	return g, clock, up
}

type answer struct {
	code    int
	blocked string
}

// ask is one request; code 0: the gateway cut it, its client having left
// (serveLeft).
func ask(g *proxy.Gateway, ctx context.Context, path string) answer {
	w := httptest.NewRecorder()
	if serveLeftTo(g, w, httptest.NewRequestWithContext(ctx, "GET", path, nil)) {
		return answer{}
	}
	return answer{w.Code, w.Header().Get("X-Sluice-Blocked")}
}

// askLater asks in the background; the answer arrives on the channel.
func askLater(g *proxy.Gateway, ctx context.Context, path string) <-chan answer {
	ch := make(chan answer, 1)
	go func() { ch <- ask(g, ctx, path) }()
	return ch
}

// holdOne starts a /held request and returns once the upstream holds it;
// it fails the test if the gateway answered instead.
func holdOne(t *testing.T, g *proxy.Gateway, up *heldUpstream) <-chan answer {
	t.Helper()
	held := askLater(g, context.Background(), "/held")
	select {
	case <-up.holding:
	case a := <-held:
		t.Fatalf("/held answered %d X-Sluice-Blocked %q without being forwarded", a.code, a.blocked)
	}
	return held
}

// A request waiting in a throttle queue is not forwarded, so it holds no
// system.maxConcurrency slot: with maxConcurrency 1, one /slow call queued
// for a second leaves the gateway open to a call to another route (it used
// to answer 429 X-Sluice-Blocked: system to every route). The slot stays
// counted once: a client leaving the queue gives back nothing it did not
// hold, so afterwards still exactly one request is forwarded at a time.
func TestSystemConcurrencyIgnoresQueuedRequest(t *testing.T) {
	g, clock, up := queueGateway(t)
	if a := ask(g, context.Background(), "/slow"); a.code != 200 { // the throttle's first call goes at once
		t.Fatalf("first /slow: %d", a.code)
	}
	ctx, leave := context.WithCancel(context.Background())
	queued := askLater(g, ctx, "/slow") // queued for 1 s
	<-clock.sleeping
	forwarded := up.calls.Load()
	a := ask(g, context.Background(), "/other")
	if a.code != 200 {
		t.Errorf("/other while the only other request waits in a throttle queue: %d X-Sluice-Blocked %q; want 200", a.code, a.blocked)
	} else {
		forwarded++
	}
	leave()
	<-queued
	if up.calls.Load() != forwarded {
		t.Fatalf("the /slow that left the queue was forwarded")
	}

	held := holdOne(t, g, up)
	if a := ask(g, context.Background(), "/other"); a.code != 429 || a.blocked != "system" {
		t.Errorf("/other while /held is in flight: %d X-Sluice-Blocked %q; want 429 system (the queued call's leaving freed a slot it did not hold)", a.code, a.blocked)
	}
	close(up.letGo)
	if a := <-held; a.code != 200 {
		t.Errorf("/held: %d", a.code)
	}
}

// A queued request takes its system.maxConcurrency slot when its wait ends:
// if the slot is taken by then it is answered 429 X-Sluice-Blocked: system
// and not forwarded, so requests forwarded never exceed maxConcurrency; once
// the slot is free again the gateway forwards.
func TestSystemConcurrencyCheckedWhenWaitEnds(t *testing.T) {
	g, clock, up := queueGateway(t)
	if a := ask(g, context.Background(), "/slow"); a.code != 200 {
		t.Fatalf("first /slow: %d", a.code)
	}
	queued := askLater(g, context.Background(), "/slow")
	<-clock.sleeping
	held := holdOne(t, g, up)
	forwarded := up.calls.Load()
	clock.wake <- struct{}{} // the queued /slow's turn, /held still in flight
	if a := <-queued; a.code != 429 || a.blocked != "system" {
		t.Errorf("/slow whose wait ended while /held is in flight: %d X-Sluice-Blocked %q; want 429 system", a.code, a.blocked)
	}
	if up.calls.Load() != forwarded {
		t.Errorf("/slow was forwarded while /held was in flight: 2 in flight under maxConcurrency 1")
	}
	close(up.letGo)
	if a := <-held; a.code != 200 {
		t.Errorf("/held: %d", a.code)
	}
	if a := ask(g, context.Background(), "/other"); a.code != 200 {
		t.Errorf("/other once nothing is in flight: %d X-Sluice-Blocked %q; want 200 (a slot was not given back)", a.code, a.blocked)
	}
}
