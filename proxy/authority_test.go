package proxy_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sluice/proxy"
)

// call is one request of an authority test: its origin (X-Origin), TCP
// peer and X-Forwarded-For, and whether it passes.
type authCall struct {
	origin, peer, xff string
	pass              bool
}

// authorityServe sends c to /item/1 and returns the status and the
// X-Sluice-Blocked header.
func authorityServe(g *proxy.Gateway, c authCall) (int, string) {
	req := httptest.NewRequest("GET", "/item/1", nil)
	req.RemoteAddr = c.peer
	if c.origin != "" {
		req.Header.Set("X-Origin", c.origin)
	}
	if c.xff != "" {
		req.Header.Set("X-Forwarded-For", c.xff)
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	return w.Code, w.Header().Get("X-Sluice-Blocked")
}

// TestAuthority: white and black rules by origin and by address (v4, v6,
// single addresses, IPv4-mapped peers, clients behind trusted proxies);
// several rules on one resource must all pass; a refused call is 403 with
// X-Sluice-Blocked: authority, never reaches the upstream and is counted
// as a block in the resource's statistics, and the flow rule behind it
// counts nothing of it.
func TestAuthority(t *testing.T) {
	const v4, v6 = "10.1.2.3:5000", "[2001:db8::7]:5000"
	tests := []struct {
		name  string
		rules string
		calls []authCall
	}{
		{"white by origin", `
authorityRules:
  - { resource: item, strategy: white, limitApp: "app-a, app-b" }
`, []authCall{
			{origin: "app-a", peer: v4, pass: true}, {origin: "app-b", peer: v4, pass: true},
			{origin: "app-c", peer: v4}, {origin: "APP-A", peer: v4},
			{peer: v4}, // no origin: not on the list (Sentinel would let it through)
		}},
		{"black by origin", `
authorityRules:
  - { resource: item, strategy: black, limitApp: app-a }
`, []authCall{
			{origin: "app-a", peer: v4}, {origin: "app-b", peer: v4, pass: true}, {peer: v4, pass: true},
		}},
		{"white by address: CIDRs and single addresses, v4 and v6", `
authorityRules:
  - { resource: item, ips: ["10.0.0.0/8", "192.168.1.7", "2001:db8::/32", "::1"] }
`, []authCall{
			{peer: v4, pass: true}, {peer: "11.0.0.1:1"}, {peer: "192.168.1.7:1", pass: true}, {peer: "192.168.1.8:1"},
			{peer: v6, pass: true}, {peer: "[2001:db9::1]:1"}, {peer: "[::1]:1", pass: true},
			{peer: "[::ffff:10.9.9.9]:1", pass: true}, // an IPv4-mapped peer is its IPv4 address
			{peer: "[::ffff:11.0.0.1]:1"},
			{peer: "[fe80::1%eth0]:1"},
			{peer: "11.0.0.1:1", xff: "10.1.1.1"}, // an untrusted peer's X-Forwarded-For is not read
		}},
		{"an IPv4-mapped CIDR is the IPv4 one", `
authorityRules:
  - { resource: item, ips: ["::ffff:10.0.0.0/104"] }
`, []authCall{{peer: v4, pass: true}, {peer: "[::ffff:10.1.1.1]:1", pass: true}, {peer: "11.0.0.1:1"}}},
		{"white by origin or address", `
authorityRules:
  - { resource: item, limitApp: app-a, ips: ["10.0.0.0/8"] }
`, []authCall{
			{origin: "app-a", peer: "11.0.0.1:1", pass: true}, {origin: "app-b", peer: v4, pass: true},
			{peer: v4, pass: true}, {origin: "app-b", peer: "11.0.0.1:1"},
		}},
		{"black by address behind a trusted proxy", `
trustedProxies: ["10.0.0.0/8"]
authorityRules:
  - { resource: item, strategy: black, ips: ["203.0.113.0/24"] }
`, []authCall{
			{peer: "10.0.0.5:1", xff: "203.0.113.9", pass: false},
			{peer: "10.0.0.5:1", xff: "203.0.113.9, 198.51.100.1", pass: true}, // the right-most untrusted hop is the client
			{peer: "10.0.0.5:1", xff: "198.51.100.1, 10.0.0.6", pass: true},
			{peer: "203.0.113.1:1", pass: false},
			{peer: "10.0.0.5:1", pass: true},
		}},
		{"several rules must all pass", `
authorityRules:
  - { resource: item, strategy: white, ips: ["10.0.0.0/8"] }
  - { resource: item, strategy: black, limitApp: app-x }
  - { resource: item, strategy: black, ips: ["10.66.0.0/16"] }
`, []authCall{
			{origin: "app-a", peer: v4, pass: true}, {origin: "app-x", peer: v4},
			{origin: "app-a", peer: "10.66.1.1:1"}, {origin: "app-a", peer: "11.0.0.1:1"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A flow rule of count 100 a minute beside it: a refused call
			// takes none of its quota, and is counted as a block.
			g, clock, up := clockedGateway(t, tc.rules+`
flowRules:
  - { resource: item, count: 100, statIntervalMs: 60000 }
`)
			passes, blocks := 0, 0
			for i, c := range tc.calls {
				status, blocked := authorityServe(g, c)
				if c.pass {
					passes++
					if status != 200 || blocked != "" {
						t.Errorf("call %d %+v: %d %q, want 200", i, c, status, blocked)
					}
				} else {
					blocks++
					if status != 403 || blocked != "authority" {
						t.Errorf("call %d %+v: %d %q, want 403 authority", i, c, status, blocked)
					}
				}
			}
			if n := int(up.calls.Load()); n != passes {
				t.Errorf("the upstream got %d calls, want the %d passed", n, passes)
			}
			clock.advance(time.Millisecond)
			st := g.Current().Flow.Stats(g.Now())
			if len(st) != 1 || st[0].Node.PassQps != float64(passes) || st[0].Node.BlockQps != float64(blocks) {
				t.Errorf("stats %+v, want %d passes and %d blocks", st, passes, blocks)
			}
		})
	}
}

// TestAuthorityRefusesGRPCAsABlock: a gRPC caller an authority rule refuses
// reads RESOURCE_EXHAUSTED (8), as SPEC section 8 answers every blocked gRPC
// call, with a grpc-message that names the reason.
func TestAuthorityRefusesGRPCAsABlock(t *testing.T) {
	g, _, up := clockedGateway(t, `
authorityRules:
  - { resource: item, strategy: black, limitApp: app-x }
`)
	req := httptest.NewRequest("POST", "/item/1", nil)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("X-Origin", "app-x")
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	if h := w.Header(); w.Code != 200 || h.Get("Grpc-Status") != "8" || h.Get("X-Sluice-Blocked") != "authority" ||
		!strings.Contains(h.Get("Grpc-Message"), "(authority)") || w.Body.Len() != 0 {
		t.Errorf("%d %v %q, want 200, grpc-status 8, a grpc-message naming authority and no body", w.Code, h, w.Body)
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the upstream got %d calls, want 0", n)
	}
}

// TestAuthorityIsForbiddenWhateverTheBlockResponse: a refused caller gets
// 403 with the block body, even where blockResponse sets another status or
// a redirect (which other blocks still get).
func TestAuthorityIsForbiddenWhateverTheBlockResponse(t *testing.T) {
	g, _, up := clockedGateway(t, `
blockResponse:
  status: 503
  redirect: https://example.com/busy
authorityRules:
  - { resource: item, strategy: black, limitApp: app-x }
flowRules:
  - { resource: item, count: 1, statIntervalMs: 60000 }
`)
	req := httptest.NewRequest("GET", "/item/1", nil)
	req.Header.Set("X-Origin", "app-x")
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	if h := w.Header(); w.Code != 403 || h.Get("Location") != "" || h.Get("X-Sluice-Blocked") != "authority" ||
		w.Body.String() != `{"error":"blocked","resource":"item","reason":"authority"}` {
		t.Errorf("refused: %d %v %q, want 403 with the block body and no Location", w.Code, h, w.Body)
	}
	if status, blocked := authorityServe(g, authCall{origin: "app-y", peer: "10.0.0.1:1"}); status != 200 || blocked != "" {
		t.Errorf("allowed: %d %q, want 200", status, blocked)
	}
	if status, blocked := authorityServe(g, authCall{origin: "app-y", peer: "10.0.0.1:1"}); status != 302 || blocked != "flow" {
		t.Errorf("flow block: %d %q, want the redirect", status, blocked)
	}
	if n := up.calls.Load(); n != 1 {
		t.Errorf("the upstream got %d calls, want 1", n)
	}
}

// TestAuthorityOnAPIGroups: an authority rule may name an API group; it
// applies to the requests whose path the group matches (a prefix that
// takes all of a route, an exact path that takes one path of a
// parameterized route), before any other rule, alongside the route's own.
// The refusal names the group, and both the route and the group count it
// as an authority block.
func TestAuthorityOnAPIGroups(t *testing.T) {
	// groupsHead ends with the list of apiGroups: one more group.
	g, _, up, obs := groupsGateway(t, `  - { name: order-7, match: [{ exact: /order/7 }] }
origin:
  from: header:X-Origin
authorityRules:
  - { resource: orders-api, strategy: black, limitApp: app-x }
  - { resource: order-7, strategy: white, ips: ["10.0.0.0/8"] }
  - { resource: other, strategy: black, limitApp: app-y }
flowRules:
  - { resource: get-order, count: 1, statIntervalMs: 60000 }
`)
	steps := []struct {
		path, origin, peer string
		status             int
		resource           string // the resource the refusal names
	}{
		{"/cart", "app-x", "10.0.0.1:1", 403, "orders-api"},
		{"/v2/orders/3", "app-x", "10.0.0.1:1", 403, "orders-api"},
		{"/other", "app-x", "10.0.0.1:1", 200, ""}, // not in the group
		{"/other", "app-y", "10.0.0.1:1", 403, "other"},
		{"/order/7", "app-a", "11.0.0.1:1", 403, "order-7"},
		{"/order/7", "app-x", "10.0.0.1:1", 403, "orders-api"},
		{"/order/8", "app-a", "11.0.0.1:1", 200, ""}, // order-7 does not match; get-order's one pass
		{"/order/7", "app-a", "10.0.0.1:1", 429, ""}, // past authority, get-order's flow rule blocks
		{"/cart", "app-a", "11.0.0.1:1", 200, ""},
	}
	for i, st := range steps {
		req := httptest.NewRequest("GET", st.path, nil)
		req.RemoteAddr = st.peer
		req.Header.Set("X-Origin", st.origin)
		w := httptest.NewRecorder()
		g.ServeHTTP(w, req)
		if w.Code != st.status {
			t.Errorf("step %d %s from %s at %s: %d %q, want %d", i, st.path, st.origin, st.peer, w.Code, w.Body, st.status)
			continue
		}
		want := fmt.Sprintf(`{"error":"blocked","resource":%q,"reason":"authority"}`, st.resource)
		if st.status == 403 && (w.Body.String() != want || w.Header().Get("X-Sluice-Blocked") != "authority") {
			t.Errorf("step %d: %q %q, want %s", i, w.Header().Get("X-Sluice-Blocked"), w.Body, want)
		}
	}
	if n := up.calls.Load(); n != 3 {
		t.Errorf("the upstream got %d calls, want the 3 passed", n)
	}
	for k, want := range map[string]int{
		"orders-api block:authority": 4, "cart block:authority": 1, "v2 block:authority": 1,
		"get-order block:authority": 2, "order-7 block:authority": 2, "other block:authority": 1,
		"orders-api block:flow": 1, "orders-api pass": 2,
	} {
		if got := obs.get(k); got != want {
			t.Errorf("observer %q = %d, want %d", k, got, want)
		}
	}
}
