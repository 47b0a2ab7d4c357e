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

// One view of a request (SPEC §11, docs/configuration.md#one-view-of-a-request):
// a limit holds however the client spells the target. Each test is a row
// of issue 24's table, sent raw as an attacker would and counted at the
// upstream. The limits count per minute, so that a busy machine cannot
// refill them between the requests.

// ovUpstream records "METHOD RequestURI" of every request it serves.
type ovUpstream struct {
	*upstream
	mu   sync.Mutex
	seen []string
}

func startOVUpstream(t *testing.T) *ovUpstream {
	u := &ovUpstream{}
	u.upstream = startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Method+" "+r.RequestURI)
		u.mu.Unlock()
		w.Write([]byte("ok"))
	})
	return u
}

func (u *ovUpstream) got() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...)
}

// ovSend sends method target raw on a new connection and returns the status
// (0: no answer).
func ovSend(t *testing.T, g *gateway, method, target string) int {
	t.Helper()
	c, err := net.Dial("tcp", hdAddr(g.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\n\r\n", method, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Logf("%s %s: %v", method, target, err)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// ovStatuses counts the statuses of sending each target.
func ovStatuses(t *testing.T, g *gateway, method string, targets ...string) map[int]int {
	t.Helper()
	n := map[int]int{}
	for _, target := range targets {
		n[ovSend(t, g, method, target)]++
	}
	return n
}

// TestOneViewFragmentIsRefused: GET /item?id=102#zN is 400 and never
// reaches the upstream, so fresh fragments cannot buy fresh keys of a
// per-id limit (2 a minute here): the same id without fragments passes
// twice.
func TestOneViewFragmentIsRefused(t *testing.T) {
	up := startOVUpstream(t)
	g := startGateway(t, rulesFor(up.URL, `
routes:
  - path: /item
    upstream: up
    resource: item
paramRules:
  - resource: item
    param: query:id
    count: 2
    durationSec: 60
`))
	var frags []string
	for i := range 10 {
		frags = append(frags, fmt.Sprintf("/item?id=102#z%d", i))
	}
	if n := ovStatuses(t, g, "GET", frags...); n[400] != 10 {
		t.Errorf("10 fragments: statuses %v, want 10 x 400", n)
	}
	if seen := up.got(); len(seen) != 0 {
		t.Errorf("the upstream saw %d requests with fragments: %q", len(seen), seen)
	}
	n := ovStatuses(t, g, "GET", "/item?id=102", "/item?id=102", "/item?id=102", "/item?id=102", "/item?id=102")
	if n[200] != 2 || n[429] != 3 {
		t.Errorf("5 x id 102: statuses %v, want 2 x 200 and 3 x 429", n)
	}
	if seen := up.got(); len(seen) != 2 || seen[0] != "GET /item?id=102" {
		t.Errorf("the upstream saw %q, want 2 x GET /item?id=102", seen)
	}
}

// TestOneViewEscapedPathMatchesItsRoute: /%68ello is /hello, matched by
// /hello's route and held to its limit (2 a minute), not by the catch-all;
// the upstream gets /hello.
func TestOneViewEscapedPathMatchesItsRoute(t *testing.T) {
	t.Parallel()
	up := startOVUpstream(t)
	g := startGateway(t, rulesFor(up.URL, `
routes:
  - path: /hello
    upstream: up
    resource: hello
  - path: /*
    upstream: up
    resource: other
flowRules:
  - resource: hello
    count: 2
    statIntervalMs: 60000
`))
	n := ovStatuses(t, g, "GET", "/%68ello", "/%68%65llo", "/%68ello", "/hell%6F", "/%68ello")
	if n[200] != 2 || n[429] != 3 {
		t.Errorf("5 x /%%68ello: statuses %v, want 2 x 200 and 3 x 429 (the limit of /hello)", n)
	}
	if seen := up.got(); len(seen) != 2 || seen[0] != "GET /hello" || seen[1] != "GET /hello" {
		t.Errorf("the upstream saw %q, want 2 x GET /hello", seen)
	}
	// "//" is merged too (server.mergeSlashes, on by default).
	if st := ovSend(t, g, "GET", "//hello"); st != 429 {
		t.Errorf("GET //hello: %d, want 429 (the limit of /hello, spent)", st)
	}
}

// TestOneViewHeadIsServedByGetRoute: HEAD /hello on a route with
// methods: [GET] is routed there and limited on its resource (2 a minute),
// not passed by the catch-all.
func TestOneViewHeadIsServedByGetRoute(t *testing.T) {
	t.Parallel()
	up := startOVUpstream(t)
	g := startGateway(t, rulesFor(up.URL, `
routes:
  - path: /hello
    methods: [GET]
    upstream: up
    resource: hello
  - path: /*
    upstream: up
    resource: other
flowRules:
  - resource: hello
    count: 2
    statIntervalMs: 60000
`))
	n := ovStatuses(t, g, "HEAD", "/hello", "/hello", "/hello", "/hello", "/hello")
	if n[200] != 2 || n[429] != 3 {
		t.Errorf("5 x HEAD /hello: statuses %v, want 2 x 200 and 3 x 429 (the limit of GET /hello)", n)
	}
	if seen := up.got(); strings.Join(seen, ",") != "HEAD /hello,HEAD /hello" {
		t.Errorf("the upstream saw %q, want 2 x HEAD /hello", seen)
	}
	// GET shares the resource's count: spent.
	if st := ovSend(t, g, "GET", "/hello"); st != 429 {
		t.Errorf("GET /hello after 2 HEADs: %d, want 429", st)
	}
}
