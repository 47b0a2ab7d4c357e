package proxy_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// TestFastPathAllocations bounds the allocations of one request served
// through Gateway.ServeHTTP on the fast path (route match, checks, forward,
// response): the RateLimit value (1; the policy is the snapshot's, and so
// is a quota's value while its limit is small), fasthttp's streamed-body
// handle (4) and the copied response header (2). Routing allocates nothing (it was
// 4 through chi's ServeHTTP; see router.go). The standard path needs about 70.
func TestFastPathAllocations(t *testing.T) {
	if proxy.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	up := startRawUpstream(t, 100)
	g := benchGateway(t, up, "fast")
	const limit = 7
	if n, w := allocsPerRequest(g, benchRequest("/item/42?x=1")); n > limit || w.status != 200 || w.n != 100 {
		t.Errorf("fast path: %.1f allocations per request (status %d with %d bytes), want <= %d", n, w.status, w.n, limit)
	}
}

func benchRequest(target string) *http.Request {
	req := httptest.NewRequest("GET", target, nil)
	req.RemoteAddr = "127.0.0.1:50000"
	return req
}

// allocsPerRequest serves req through g once to warm the pools, the
// connection and any tracked value, then counts the allocations of one
// request. w holds the last response.
func allocsPerRequest(g http.Handler, req *http.Request) (allocs float64, w *discardWriter) {
	w = &discardWriter{h: http.Header{}}
	serve := func() {
		clear(w.h)
		w.status, w.n = 0, 0
		g.ServeHTTP(w, req)
	}
	serve()
	return testing.AllocsPerRun(200, serve), w
}

// allocsWith loads rules into a new gateway and counts the allocations of
// one request req through it (allocsPerRequest), which must answer 200.
func allocsWith(t *testing.T, rules string, req *http.Request) (float64, *discardWriter) {
	t.Helper()
	cfg, err := config.Parse("allocs.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	n, w := allocsPerRequest(g, req)
	if w.status != 200 {
		t.Fatalf("status %d", w.status)
	}
	return n, w
}

// allocBase is a fast route to an upstream (%q) with the RateLimit fields
// off, so that the route with rules added and the bare one serve the same
// response.
const allocBase = `
blockResponse:
  rateLimitHeaders: false
upstreams:
  up:
    targets: [%q]
routes:
  - path: /item/{id}
    upstream: up
    resource: item
    forwarder: fast
`

// TestHostRoutingAllocations: matching the Host (port, case and trailing
// dot dropped, wildcards) adds nothing to the fast path's allocations.
func TestHostRoutingAllocations(t *testing.T) {
	if proxy.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	up := startRawUpstream(t, 100)
	g := benchHostGateway(t, up)
	req := benchRequest("/item/42?x=1")
	for _, host := range []string{"Shop.Example.COM.:8443", "a.b.Example.com", "nohost.test"} {
		req.Host = host
		const limit = 8
		if n, w := allocsPerRequest(g, req); n > limit || w.status != 200 || w.n != 100 {
			t.Errorf("Host %q: %.1f allocations per request (status %d with %d bytes), want <= %d", host, n, w.status, w.n, limit)
		}
	}
}

// TestGuardsAllocateNothing serves the same request on the fast path with
// no rules (the system and flow guards run with nothing to check) and with
// every guard busy (authority by address, system, flow qps and
// concurrency, param, degrade): the
// checks, the loop that runs them and the tokens they hold add no
// allocation. RateLimit headers are off, so that both serve the same
// response.
func TestGuardsAllocateNothing(t *testing.T) {
	if proxy.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	base := fmt.Sprintf(allocBase, startRawUpstream(t, 100))
	guarded := base + `
authorityRules:
  - resource: item
    strategy: black
    ips: ["10.0.0.0/8", "2001:db8::/32"]
system:
  maxQps: 1000000000
  maxConcurrency: 1000000
flowRules:
  - resource: item
    count: 1000000000
  - resource: item
    grade: concurrency
    count: 1000000
paramRules:
  - resource: item
    param: path:id
    count: 1000000000
degradeRules:
  - resource: item
    strategy: errorRatio
    threshold: 0.5
    retryTimeoutMs: 1000
`
	bare, _ := allocsWith(t, base, benchRequest("/item/42"))
	if all, _ := allocsWith(t, guarded, benchRequest("/item/42")); all > bare {
		t.Errorf("every guard on the route: %.1f allocations per request, without rules %.1f: the checks allocate", all, bare)
	}
}

// TestSourcesAllocateNothing: reading a query parameter, a header, a
// cookie and the client address for param rules and the origin adds no
// allocation to a request with one value of each (several values are read
// into the pooled exchange, not a slice of their own), nor do composite
// keys (joined in the exchange's kept buffer) and matches.
func TestSourcesAllocateNothing(t *testing.T) {
	if proxy.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	base := fmt.Sprintf(allocBase, startRawUpstream(t, 100))
	rules := map[string]string{
		"query, header, cookie": base + `
origin:
  from: header:X-Origin
paramRules:
  - { resource: item, param: "query:id", count: 1000000000 }
  - { resource: item, param: "header:X-Key", count: 1000000000 }
  - { resource: item, param: "cookie:sid", count: 1000000000 }
`,
		"ip": base + `
trustedProxies: ["127.0.0.0/8"]
paramRules:
  - { resource: item, param: ip, count: 1000000000 }
`,
		// (A call holds the tokens of three param rules without allocating.)
		"composite keys": base + `
trustedProxies: ["127.0.0.0/8"]
paramRules:
  - { resource: item, param: "ip+header:X-Key", count: 1000000000 }
  - { resource: item, param: "header:X-Key+query:id+cookie:sid", count: 1000000000 }
`,
		"matches": base + `
trustedProxies: ["127.0.0.0/8"]
paramRules:
  - { resource: item, param: ip, count: 1000000000, match: { strategy: cidr, pattern: "9.0.0.0/8" } }
  - resource: item
    param: query:id
    count: 1000000000
    match: { strategy: regex, pattern: "^[0-9]+$" }
    items: [{ value: "1", match: prefix, count: 1000000000 }]
`,
	}
	req := benchRequest("/item/42?a=1&id=102")
	req.Header.Set("X-Origin", "app")
	req.Header.Set("X-Key", "k1")
	req.Header.Set("Cookie", "a=1; sid=s1")
	req.Header.Set("X-Forwarded-For", "9.9.9.9")
	bare, _ := allocsWith(t, base, req)
	for name, r := range rules {
		if n, _ := allocsWith(t, r, req); n > bare {
			t.Errorf("param rules on %s: %.1f allocations per request, without rules %.1f: reading the sources allocates", name, n, bare)
		}
	}
}

// sentMarkAllocs is what noting a standard call's reaching the upstream
// costs (forward_standard.go's sentMark), for failure rules' calls only.
const sentMarkAllocs = 3

// TestAnswerChargeAllocatesNothing: param rules that take their tokens
// after the answer (countOn failure, countOn responseHeader:NAME, whose
// header is read and removed) add no allocation to a request on the fast
// path, nor on the standard path, over the same rule counting requests.
func TestAnswerChargeAllocatesNothing(t *testing.T) {
	if proxy.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	up := startRawUpstreamHeader(t, 100, "X-Tokens-Used: 7\r\n")
	const param = `paramRules:
  - resource: item
    param: path:id
    count: 1000000000
`
	rules := map[string]string{
		"failure":        param + "    countOn: failure\n    failureStatuses: [200]\n",
		"responseHeader": param + "    countOn: \"responseHeader:X-Tokens-Used\"\n",
	}
	for _, fwd := range []string{"fast", "standard"} {
		base := strings.Replace(fmt.Sprintf(allocBase, up), "forwarder: fast", "forwarder: "+fwd, 1)
		allocs := func(rules string) (float64, *discardWriter) {
			return allocsWith(t, base+rules, benchRequest("/item/42"))
		}
		bare, w := allocs(param)
		if w.h.Get("X-Tokens-Used") != "7" {
			t.Fatalf("%s: a rule counting requests removed the upstream's X-Tokens-Used", fwd)
		}
		for name, r := range rules {
			n, w := allocs(r)
			// A failure rule's call on the standard path carries the note of
			// whether its request reached the upstream (sentMark: the mark,
			// its hook and the trace's context), which the charge reads; the
			// charge itself adds nothing.
			mark := 0.0
			if fwd == "standard" && name == "failure" {
				mark = sentMarkAllocs
			}
			if n > bare+mark {
				t.Errorf("%s, countOn %s: %.1f allocations per request, counting requests %.1f (+%.0f for the sent mark): the charge after the answer allocates", fwd, name, n, bare, mark)
			}
			if name == "responseHeader" && len(w.h["X-Tokens-Used"]) > 0 {
				t.Errorf("%s: the client got X-Tokens-Used: %q", fwd, w.h["X-Tokens-Used"])
			}
		}
	}
}

// BenchmarkGatewayCountOn is one request through the fast path with a param
// rule counting requests, failures (the answer's status) or the answer's
// X-Tokens-Used: the allocations per request are the same for the three
// (the forwarding's own, see TestFastPathAllocations).
func BenchmarkGatewayCountOn(b *testing.B) {
	up := startRawUpstreamHeader(b, 100, "X-Tokens-Used: 7\r\n")
	for _, countOn := range []string{"request", "failure\n    failureStatuses: [200]", "\"responseHeader:X-Tokens-Used\""} {
		name, _, _ := strings.Cut(countOn, "\n")
		b.Run(strings.Trim(name, `"`), func(b *testing.B) {
			cfg, err := config.Parse("bench.yaml", []byte(fmt.Sprintf(allocBase+`paramRules:
  - resource: item
    param: path:id
    count: 1000000000
    countOn: %s
`, up, countOn)))
			if err != nil {
				b.Fatal(err)
			}
			g := proxy.New(proxy.Deps{Log: zerolog.Nop()})
			if err := g.Load(cfg); err != nil {
				b.Fatal(err)
			}
			req := benchRequest("/item/42")
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				w.status, w.n = 0, 0
				g.ServeHTTP(w, req)
			}
			if w.status != 200 {
				b.Fatalf("status %d", w.status)
			}
		})
	}
}
