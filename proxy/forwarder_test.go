package proxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sluice/config"
)

// TestForwarderChoice pins which requests each mode sends where.
func TestForwarderChoice(t *testing.T) {
	std, fast := &standardForwarder{}, &fastForwarder{}
	type tc struct {
		name        string
		method, url string
		body        string
		chunked     bool
		header      []string
		auto, force string // forwarder chosen by auto and by fast
	}
	cases := []tc{
		{name: "plain GET", method: "GET", url: "/a?x=1", auto: "fast", force: "fast"},
		{name: "small POST", method: "POST", url: "/a", body: "x=1", auto: "fast", force: "fast"},
		{name: "WebSocket", method: "GET", url: "/ws", header: []string{"Connection: Upgrade", "Upgrade: websocket"}, auto: "standard", force: "standard"},
		{name: "Expect", method: "POST", url: "/a", body: "x", header: []string{"Expect: 100-continue"}, auto: "standard", force: "standard"},
		{name: "event stream", method: "GET", url: "/sse", header: []string{"Accept: text/event-stream"}, auto: "standard", force: "fast"},
		{name: "TE trailers", method: "POST", url: "/grpc", header: []string{"TE: trailers"}, auto: "standard", force: "fast"},
		{name: "chunked body", method: "POST", url: "/a", body: "x", chunked: true, auto: "standard", force: "fast"},
		{name: "large body", method: "PUT", url: "/a", body: strings.Repeat("x", fastBodyCap+1), auto: "standard", force: "fast"},
		{name: "body at cap", method: "PUT", url: "/a", body: strings.Repeat("x", fastBodyCap), auto: "fast", force: "fast"},
		{name: "GET with body", method: "GET", url: "/a", body: "x", auto: "standard", force: "standard"},
		// The view drops an empty "?" on both, so fast can carry it.
		{name: "empty query", method: "GET", url: "/a?", auto: "fast", force: "fast"},
		// Only with server.mergeSlashes: false (this test's view).
		{name: "double slash path", method: "GET", url: "/a//b", auto: "standard", force: "standard"},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, c.url, nil)
		if c.body != "" {
			r = httptest.NewRequest(c.method, c.url, strings.NewReader(c.body))
			if c.chunked {
				r.ContentLength = -1
			}
		}
		for _, h := range c.header {
			k, v, _ := strings.Cut(h, ":")
			r.Header.Add(k, strings.TrimSpace(v))
		}
		v, bad := readTarget(r, targetRules{keepParams: true})
		if bad != badNone {
			t.Fatalf("%s: readTarget: %d", c.name, bad)
		}
		for _, m := range []struct {
			mode forwarderMode
			want string
		}{{modeAuto, c.auto}, {modeFast, c.force}, {modeStandard, "standard"}} {
			rt := &route{mode: m.mode, std: std, fast: fast}
			if got := rt.forwarderFor(r, &v).name(); got != m.want {
				t.Errorf("%s, mode %d: %s, want %s", c.name, m.mode, got, m.want)
			}
		}
	}
	// A request with trailers declared must go standard.
	r := httptest.NewRequest("POST", "/a", strings.NewReader("x"))
	r.Trailer = http.Header{"X-Sum": nil}
	if got := (&route{mode: modeFast, std: std, fast: fast}).forwarderFor(r, &view{path: "/a"}).name(); got != "standard" {
		t.Errorf("request trailers: %s, want standard", got)
	}
	// A route whose calls hold a slot in flight: auto sends a plain GET
	// the standard path, which cancels the upstream call when the client
	// leaves; a forced fast route keeps the fast path.
	r = httptest.NewRequest("GET", "/a", nil)
	for mode, want := range map[forwarderMode]string{modeAuto: "standard", modeFast: "fast", modeStandard: "standard"} {
		if got := (&route{mode: mode, std: std, fast: fast, holdsSlot: true}).forwarderFor(r, &view{path: "/a"}).name(); got != want {
			t.Errorf("a route holding a slot, mode %d: %s, want %s", mode, got, want)
		}
	}
}

// TestSlotRules: the routes whose calls hold a slot in flight, by the
// rules of the snapshot.
func TestSlotRules(t *testing.T) {
	cfg := &config.Config{
		FlowRules: []config.FlowRule{
			{Resource: "conc", Grade: config.GradeConcurrency},
			{Resource: "qps", Grade: config.GradeQPS},
			{Resource: "rel", Grade: config.GradeConcurrency, Strategy: config.StrategyRelate, RefResource: "read"},
		},
		ParamRules: []config.ParamRule{{Resource: "pconc", Grade: config.GradeConcurrency}, {Resource: "pqps", Grade: config.GradeQPS}},
	}
	s := newSlotRules(cfg)
	for res, want := range map[string]bool{"conc": true, "qps": false, "rel": true, "read": true, "pconc": true, "pqps": false, "other": false} {
		if s.held(res) != want {
			t.Errorf("%s: held %v, want %v", res, !want, want)
		}
	}
	for name, c := range map[string]config.Config{
		"system.maxConcurrency": {System: config.System{MaxConcurrency: 5}},
		"system.adaptive":       {System: config.System{Adaptive: true}},
		"an API group's rule": {APIGroups: []config.APIGroup{{Name: "grp"}},
			FlowRules: []config.FlowRule{{Resource: "grp", Grade: config.GradeConcurrency}}},
	} {
		if !newSlotRules(&c).held("any") {
			t.Errorf("under %s, a route without rules holds no slot", name)
		}
	}
}

func TestIsEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream": true, "Text/Event-Stream; charset=utf-8": true, " text/event-stream": true,
		"text/event-streamx": false, "text/plain": false, "": false,
	} {
		if got := isEventStream([]byte(ct)); got != want {
			t.Errorf("isEventStream(%q) = %v", ct, got)
		}
	}
}

func TestWholeQuota(t *testing.T) {
	for _, c := range []struct {
		limit      float64
		window     time.Duration
		wantQ      int64
		wantWindow time.Duration
	}{
		{100, time.Second, 100, time.Second},
		{0.5, time.Second, 1, 2 * time.Second},
		{0.3, time.Second, 3, 10 * time.Second},
		{2.5, 10 * time.Second, 5, 20 * time.Second},
		// Windows of no whole second: the rate stays the rule's.
		{100, 500 * time.Millisecond, 200, time.Second},
		{3, 1500 * time.Millisecond, 6, 3 * time.Second},
		{7, 333 * time.Millisecond, 7000, 333 * time.Second},
		{10, time.Minute, 10, time.Minute},
		{0, time.Second, 0, time.Second},
	} {
		q, w := wholeQuota(c.limit, c.window)
		if q != c.wantQ || w != c.wantWindow {
			t.Errorf("wholeQuota(%v, %v) = %d, %v; want %d, %v", c.limit, c.window, q, w, c.wantQ, c.wantWindow)
		}
	}
}
