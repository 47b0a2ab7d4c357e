package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sluice/internal/passcheck"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// grpGateway serves a whole rules document on the synthetic clock through
// the stub upstream, with an observer per resource.
func grpGateway(t *testing.T, doc string) (*proxy.Gateway, *fakeClock, *stubUpstream, *resourceObserver) {
	t.Helper()
	cfg, err := config.Parse("review.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{}
	clock.advance(1000 * time.Second)
	up := &stubUpstream{}
	up.status.Store(200)
	obs := &resourceObserver{counts: map[string]int{}}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: clock, Transport: up, Forwarder: "standard", Observer: obs.For})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	return g, clock, up, obs
}

func grpDo(g *proxy.Gateway, method, target string, hdr ...string) (int, string) {
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr = "10.1.2.3:5000"
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	return w.Code, w.Header().Get("X-Sluice-Blocked")
}

const rvHead = `
origin:
  from: header:X-Origin
upstreams:
  up:
    targets: ["http://upstream.invalid"]
routes:
  - { path: "/hello/{id}", upstream: up, resource: hello, methods: [GET] }
  - { path: "/api", upstream: up, resource: api }
  - { path: "/apix", upstream: up, resource: apix }
  - { path: "/static/page", upstream: up, resource: page, methods: [GET] }
`

// TestGroupNormalizedPathAndHead: a group matches the normalized
// path (unreserved escapes decoded), HEAD is counted on the GET route's groups.
func TestGroupNormalizedPathAndHead(t *testing.T) {
	g, _, _, obs := grpGateway(t, rvHead+`
apiGroups:
  - name: hello-api
    match: [{ prefix: /hello/ }, { exact: /static/page }]
flowRules:
  - { resource: hello-api, count: 3 }
`)
	for i, c := range []struct{ method, path, want string }{
		{"GET", "/%68ello/1", ""},
		{"HEAD", "/hello/2", ""},
		{"HEAD", "/static/%70age", ""},
		{"GET", "/hello/3", "flow"},
		{"HEAD", "/static/page", "flow"},
	} {
		code, blocked := grpDo(g, c.method, c.path)
		if blocked != c.want {
			t.Errorf("%d %s %s: %d %q, want %q", i, c.method, c.path, code, blocked, c.want)
		}
	}
	if n := obs.get("hello-api pass"); n != 3 {
		t.Errorf("hello-api passes %d, want 3", n)
	}
}

// TestGroupAuthority: authority rules on an API group (a regex and
// a prefix entry, a white list with spaces in limitApp, a black list of an
// IPv4-mapped CIDR) refuse on normalized paths and count on the group.
func TestGroupAuthority(t *testing.T) {
	g, _, up, obs := grpGateway(t, rvHead+`
apiGroups:
  - name: hello-api
    match: [{ regex: "^/h.llo/" }, { prefix: /api }]
authorityRules:
  - { resource: hello-api, strategy: white, limitApp: "a , b" }
  - { resource: hello-api, strategy: black, ips: ["::ffff:10.1.0.0/112"] }
flowRules:
  - { resource: hello-api, grade: concurrency, count: 1 }
`)
	for i, c := range []struct {
		method, path, origin, want string
	}{
		{"GET", "//hello//1", "a", "authority"},
		{"GET", "/apix", "", "authority"},
		{"GET", "/apix", "c", "authority"},
		{"GET", "/static/page", "", ""},
	} {
		code, blocked := grpDo(g, c.method, c.path, "X-Origin", c.origin)
		if blocked != c.want {
			t.Errorf("%d %s %s: %d %q, want %q", i, c.method, c.path, code, blocked, c.want)
		}
	}
	if obs.get("hello-api block:authority") != 3 || obs.get("page pass") != 1 || up.calls.Load() != 1 {
		t.Errorf("counts %v, %d calls", obs.counts, up.calls.Load())
	}
}

// TestGroupConcurrencyReleased: a group's concurrency flow and param
// rules release their slot on 5xx answers, retries and HEAD.
func TestGroupConcurrencyReleased(t *testing.T) {
	g, _, up, _ := grpGateway(t, `
upstreams:
  up:
    targets: ["http://upstream.invalid", "http://upstream2.invalid"]
    retries: 2
routes:
  - { path: "/hello/{id}", upstream: up, resource: hello }
apiGroups:
  - name: grp
    match: [{ prefix: /hello/ }]
flowRules:
  - { resource: grp, grade: concurrency, count: 1 }
paramRules:
  - { resource: grp, grade: concurrency, param: "path:id", count: 1 }
degradeRules:
  - { resource: grp, strategy: errorCount, threshold: 1000, minRequestAmount: 1000 }
`)
	for i, st := range []int32{503, 500, 200, 502, 200, 200} {
		up.status.Store(st)
		for _, m := range []string{"GET", "POST", "HEAD"} {
			if _, blocked := grpDo(g, m, "/hello/1"); blocked != "" {
				t.Fatalf("%d %s (status %d): blocked %q: a slot leaked", i, m, st, blocked)
			}
		}
	}
}

// TestPrioritizedLeaves: a prioritized call waiting for a group's
// reserved pass whose client leaves is not forwarded and gives back its pass.
func TestPrioritizedLeaves(t *testing.T) {
	g, clock, up, _ := grpGateway(t, `
upstreams:
  up:
    targets: ["http://upstream.invalid"]
routes:
  - { path: "/hello/{id}", upstream: up, resource: hello, prioritized: true, occupyTimeoutMs: 1000 }
apiGroups:
  - name: grp
    match: [{ prefix: /hello/ }]
flowRules:
  - { resource: grp, grade: concurrency, count: 1 }
  - { resource: grp, count: 2 }
  - { resource: hello, count: 30, controlBehavior: warmUp, warmUpPeriodSec: 1 }
`)
	for i := 0; i < 2; i++ {
		if _, b := grpDo(g, "GET", "/hello/1"); b != "" {
			t.Fatalf("call %d blocked %q", i, b)
		}
	}
	// the third waits; its client has left
	req := httptest.NewRequest("GET", "/hello/1", nil)
	ctx, cancel := context.WithCancel(req.Context())
	cancel()
	req = req.WithContext(ctx)
	if !serveLeft(g, req) {
		t.Error("the request of a client that left was answered")
	}
	if n := up.calls.Load(); n != 2 {
		t.Fatalf("the call whose client left was forwarded (%d calls)", n)
	}
	// Its reserved pass and the group's concurrency slot are back: the
	// next call takes the same slot.
	if _, b := grpDo(g, "GET", "/hello/1"); b != "" || up.calls.Load() != 3 {
		t.Fatalf("next call: blocked %q, %d calls", b, up.calls.Load())
	}
	if w := clock.waits(); len(w) != 2 || w[1] != time.Second {
		t.Errorf("waits %v, want [1s 1s]", w)
	}
}

// recUpstream records the synthetic time of every forwarded request.
type recUpstream struct {
	stubUpstream
	clock *fakeClock
	at    []int64
}

func (u *recUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	u.at = append(u.at, u.clock.Now())
	return u.stubUpstream.RoundTrip(r)
}

// TestSystemMaxQpsWithPrioritizedWait: system.maxQps counts a call's
// pass when it enters, but a prioritized call goes upstream when its wait
// ends: no real second may forward more than maxQps calls (SPEC §3 Grades:
// "the same promise holds ... for system.maxQps").
func TestSystemMaxQpsWithPrioritizedWait(t *testing.T) {
	cfg, err := config.Parse("sys.yaml", []byte(`
upstreams:
  up:
    targets: ["http://upstream.invalid"]
routes:
  - { path: /p, upstream: up, resource: p, prioritized: true, occupyTimeoutMs: 1000 }
  - { path: /q, upstream: up, resource: q }
system:
  maxQps: 10
flowRules:
  - { resource: p, count: 5 }
`))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{}
	clock.advance(1000 * time.Second)
	up := &recUpstream{clock: clock}
	up.status.Store(200)
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: clock, Transport: up, Forwarder: "standard"})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ { // the sixth waits 1 s for the flow rule's room
		grpDo(g, "GET", "/p")
	}
	for i := 0; i < 12; i++ {
		grpDo(g, "GET", "/q")
	}
	if got := passcheck.MostInInterval(up.at, int64(time.Second)); got > 10 {
		t.Errorf("a real second forwarded %d calls, system.maxQps 10 (forward times %v)", got, up.at)
	}
}

// TestPrioritizedRefusalRateLimitFields: a prioritized call refused
// because no moment within occupyTimeoutMs has room is a flow block like
// any other: its 429 has the RateLimit fields of the qps rule that blocked
// it (docs/rules.md, Combining rules), as the same call on a plain route.
func TestPrioritizedRefusalRateLimitFields(t *testing.T) {
	for _, prio := range []string{"false", "true"} {
		g, _, _, _ := grpGateway(t, `
upstreams:
  up:
    targets: ["http://upstream.invalid"]
routes:
  - { path: "/order/{id}", upstream: up, resource: get-order, prioritized: `+prio+`, occupyTimeoutMs: 100 }
flowRules:
  - { resource: get-order, count: 1 }
`)
		grpDo(g, "GET", "/order/1")
		req := httptest.NewRequest("GET", "/order/1", nil)
		w := httptest.NewRecorder()
		g.ServeHTTP(w, req)
		if w.Code != 429 {
			t.Fatalf("prioritized %s: second call %d, want 429", prio, w.Code)
		}
		t.Logf("prioritized %s: %v", prio, w.Header())
		if w.Header().Get("RateLimit") == "" || w.Header().Get("RateLimit-Policy") == "" {
			t.Errorf("prioritized %s: 429 without RateLimit fields: %v", prio, w.Header())
		}
	}
}

// ctxUpstream fails every call whose client context is already done, as a
// transport does when the client leaves mid-call.
type ctxUpstream struct{ stubUpstream }

func (u *ctxUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		u.calls.Add(1)
		return nil, err
	}
	return u.stubUpstream.RoundTrip(r)
}

// TestGroupConcurrencyClientGone: a group's concurrency slot is
// released when the client leaves during the upstream call.
func TestGroupConcurrencyClientGone(t *testing.T) {
	cfg, err := config.Parse("gone.yaml", []byte(`
upstreams:
  up:
    targets: ["http://upstream.invalid"]
routes:
  - { path: "/hello/{id}", upstream: up, resource: hello }
apiGroups:
  - name: grp
    match: [{ prefix: /hello/ }]
flowRules:
  - { resource: grp, grade: concurrency, count: 1 }
  - { resource: hello, grade: concurrency, count: 1 }
`))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{}
	clock.advance(1000 * time.Second)
	up := &ctxUpstream{}
	up.status.Store(200)
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: clock, Transport: up, Forwarder: "standard"})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		req := httptest.NewRequest("GET", "/hello/1", nil)
		ctx, cancel := context.WithCancel(req.Context())
		cancel()
		if !serveLeft(g, req.WithContext(ctx)) {
			t.Error("the request of a client that left was answered")
		}
	}
	if _, b := grpDo(g, "GET", "/hello/2"); b != "" {
		t.Fatalf("after clients left: blocked %q (a slot leaked)", b)
	}
}
