package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// recordingRawGW is a gateway in front of a recording upstream.
type recordingRawGW struct {
	addr string
	mu   sync.Mutex
	got  []*http.Request
	obs  *observed
}

func newRecordingRawGW(t *testing.T, fwd, rules string) *recordingRawGW {
	t.Helper()
	rg := &recordingRawGW{obs: &observed{by: map[string]*counter{}}}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rg.mu.Lock()
		rg.got = append(rg.got, r.Clone(r.Context()))
		rg.mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	cfg, err := config.Parse("oneview.yaml", []byte(strings.ReplaceAll(rules, "UPSTREAM", up.URL)))
	if err != nil {
		t.Fatal(err)
	}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: fwd, Observer: rg.obs.observer})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	rg.addr = strings.TrimPrefix(srv.URL, "http://")
	return rg
}

// send writes one raw request (head lines as given) and returns the
// status, the X-Sluice-Blocked header and the upstream's request (nil: none).
func (rg *recordingRawGW) send(t *testing.T, method, target string, headers ...string) (int, string, *http.Request) {
	t.Helper()
	rg.mu.Lock()
	rg.got = nil
	rg.mu.Unlock()
	resp, _ := rawRequest(t, rg.addr, method, target, headers...)
	rg.mu.Lock()
	defer rg.mu.Unlock()
	var up *http.Request
	if len(rg.got) > 0 {
		up = rg.got[0]
	}
	return resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"), up
}

// TestH2QuerySpaceIs400: an HTTP/2 :path may hold a raw space in its query,
// which HTTP/1.1 cannot carry (SPEC §11: anything net/http reads otherwise
// than the upstream leg writes it is 400). It was counted (id="a b") and
// written byte for byte into the upstream's request line, "GET /raw?id=a b
// HTTP/1.1": a Go upstream answers 400, and a lenient one reads
// "?x=1&id=v /admin?id=w" as a target the gateway never routed. Now it is
// 400 before any rule counts it, on both forwarders.
func TestH2QuerySpaceIs400(t *testing.T) {
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			lines := make(chan string, 10)
			ln := serveConns(t, func(c net.Conn) {
				l, _ := bufio.NewReader(c).ReadString('\n')
				lines <- strings.TrimRight(l, "\r\n")
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			})
			cfg, err := config.Parse("h2.yaml", []byte(fmt.Sprintf(`
upstreams:
  raw: {targets: ["http://%s"]}
routes:
  - path: /*
    upstream: raw
    resource: raw
paramRules:
  - { resource: raw, param: "query:id", count: 100, durationSec: 3600 }
`, ln.Addr())))
			if err != nil {
				t.Fatal(err)
			}
			obs := &observed{by: map[string]*counter{}}
			g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Forwarder: fwd, Observer: obs.observer})
			if err := g.Load(cfg); err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			srv := httptest.NewUnstartedServer(g)
			srv.EnableHTTP2 = true
			srv.StartTLS()
			defer srv.Close()
			cl := srv.Client()
			cl.Timeout = 5 * time.Second
			for _, q := range []string{"id=a b", "x=1&id=v /admin?id=w"} {
				req, _ := http.NewRequest("GET", srv.URL+"/raw", nil)
				req.URL.RawQuery = q
				resp, err := cl.Do(req)
				if err != nil {
					t.Fatalf("%q: %v", q, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.ProtoMajor != 2 {
					t.Fatalf("not HTTP/2: %s", resp.Proto)
				}
				select {
				case l := <-lines:
					if parts := strings.Split(l, " "); len(parts) != 3 {
						t.Errorf("h2 query %q: limiter counted it (status %d) and the upstream got the malformed request line %q",
							q, resp.StatusCode, l)
					}
				case <-time.After(200 * time.Millisecond):
					if resp.StatusCode != http.StatusBadRequest {
						t.Errorf("h2 query %q: %d, not forwarded; want 400", q, resp.StatusCode)
					}
				}
			}
		})
	}
}

// TestStripPrefixNeverSendsDotSegment: stripPrefix cuts the prefix where
// it ends, as Traefik's and nginx's do, so "/api../admin" (no dot segment
// itself) under prefix "/api" would reach the upstream as "/../admin",
// which it cleans into "/admin" while the limits saw "/api../admin" (an
// API group on "/api/admin" stepped around). Such a request is 400 on
// both forwarders (SPEC §11: dot segments 400; the upstream receives the
// normalized path, then stripPrefix).
func TestStripPrefixNeverSendsDotSegment(t *testing.T) {
	rules := `
upstreams:
  up: {targets: ["UPSTREAM"]}
routes:
  - path: /api*
    upstream: up
    stripPrefix: /api
    resource: api
  - path: /v/*
    upstream: up
    stripPrefix: /v/1
    resource: v
  - path: /*
    upstream: up
    resource: other
`
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			rg := newRecordingRawGW(t, fwd, rules)
			// Every prefix, first segment after it and rest: the dot ones
			// (escaped, with ;parameters, ended by a backslash) are
			// refused, the others forwarded,
			// and no forwarded path holds a dot segment as an upstream
			// reads it (decoded, ";..." dropped).
			for _, prefix := range []string{"/api", "/v/1"} {
				for _, first := range []string{".", "..", ".%2e", "%2E.", "%2e%2E", "..;", ".;x", "..;jsessionid=1", "..%2F", ".x", "..x", "...", "x..",
					`..\`, "..%5C", "..%5c", `.\`, `..;\`, `x..\`} {
					for _, rest := range []string{"", "/admin", "/admin?id=1"} {
						target := prefix + first + rest
						// The first segment as an upstream cuts it: at '/'
						// or, for IIS and ASP.NET, at '\'.
						seg := strings.NewReplacer("%2e", ".", "%2E", ".", "%2F", "/", "%5C", "/", "%5c", "/", `\`, "/").Replace(first)
						seg, _, _ = strings.Cut(seg, "/")
						dot := dotSegment(seg)
						status, _, up := rg.send(t, "GET", target)
						switch {
						case up == nil && status != http.StatusBadRequest:
							t.Errorf("%s: %d, not forwarded", target, status)
						case up == nil && !dot:
							t.Errorf("%s: refused (%d), though stripping %s leaves no dot segment", target, status, prefix)
						case up != nil && dot:
							t.Errorf("%s: passed the limits as itself (%d), the upstream got %q", target, status, up.RequestURI)
						case up != nil:
							for _, seg := range strings.Split(up.URL.Path, "/") {
								if dotSegment(seg) {
									t.Errorf("%s: the upstream got the dot segment path %q", target, up.RequestURI)
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestDotSegmentSpellingsAre400: upstreams clean more than "/../" into a
// parent: Java servlet containers (Tomcat, Jetty, Spring) drop ";..." from
// each segment first, so "/items/..;/hello" was counted on route "items"
// while such an upstream served /hello, whose own route's limits were
// stepped around; IIS and ASP.NET read '\' as '/', so "/items/x/..\hello"
// (raw or as %5C) did the same (the smuggling audit). They are 400 like
// "..", "%2e%2e" and "..%2f"; a ';' or a backslash elsewhere is forwarded.
func TestDotSegmentSpellingsAre400(t *testing.T) {
	rules := `
upstreams:
  up: {targets: ["UPSTREAM"]}
routes:
  - path: /hello
    upstream: up
    resource: hello
  - path: /items/{id}/*
    upstream: up
    resource: items
  - path: /*
    upstream: up
    resource: other
`
	refused := []string{"/items/..;/hello", "/items/x/..;jsessionid=1/hello", "/items/.;/x",
		`/items/x/..\hello`, "/items/x/..%5chello", "/items/x/..%5Chello", `/items/x\..\hello`, `/items/x/.\y`}
	forwarded := []string{`/items/x/a\b`, "/items/x/a%5Cb", `/items/x/..a\b`}
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			rg := newRecordingRawGW(t, fwd, rules)
			for _, target := range refused {
				status, _, up := rg.send(t, "GET", target)
				if status != http.StatusBadRequest || up != nil {
					u := ""
					if up != nil {
						u = up.RequestURI
					}
					t.Errorf("%s: %d, upstream got %q; want 400 (a dot segment)", target, status, u)
				}
			}
			for _, target := range forwarded {
				if status, _, up := rg.send(t, "GET", target); status != http.StatusOK || up == nil {
					t.Errorf("%s: %d, want forwarded (no dot segment)", target, status)
				}
			}
		})
	}
}

// TestConnectionNamedHeaderIsNoSource: a header the client's Connection
// names is hop-by-hop, and neither forwarder passes it on; the sources
// once read it anyway, so "X-Tenant: a" + "Connection: X-Tenant" spent
// tenant a's budget on a request the upstream saw without a tenant. A
// header the gateway does not forward is no source value (SPEC §11: the
// gateway decides on exactly the request it forwards).
func TestConnectionNamedHeaderIsNoSource(t *testing.T) {
	rules := `
upstreams:
  up: {targets: ["UPSTREAM"]}
routes:
  - path: /*
    upstream: up
    resource: other
paramRules:
  - { resource: other, param: "header:X-Tenant", count: 1, durationSec: 3600 }
`
	// A long list is put in a set (connNamesOf): it must name what a short
	// one names, in any case.
	var filler []string
	for i := range 60 {
		filler = append(filler, fmt.Sprintf("X-Filler-%d", i))
	}
	long := strings.Join(filler[:30], ", ") + ", x-TENANT, " + strings.Join(filler[30:], ",")
	for _, fwd := range []string{"standard", "fast"} {
		for _, conn := range []string{"X-Tenant", long} {
			t.Run(fmt.Sprintf("%s/%d bytes", fwd, len(conn)), func(t *testing.T) {
				rg := newRecordingRawGW(t, fwd, rules)
				status, _, up := rg.send(t, "GET", "/x", "X-Tenant: a", "X-Kept: k", "Connection: "+conn)
				if up == nil || status != 200 {
					t.Fatalf("first request: %d", status)
				}
				if v := up.Header.Get("X-Tenant"); v != "" {
					t.Fatalf("the upstream got X-Tenant %q, which Connection names: a hop-by-hop header was forwarded", v)
				}
				if v := up.Header.Get("X-Kept"); v != "k" {
					t.Fatalf("the upstream got X-Kept %q, want k: Connection does not name it", v)
				}
				if status, bl, _ := rg.send(t, "GET", "/x", "X-Tenant: a"); status != 200 {
					t.Errorf("tenant a's first forwarded request: %d %q; its budget went to a request the upstream got without X-Tenant", status, bl)
				}
			})
		}
	}
}

// dotSegment reports a segment an upstream cleans as "." or "..": itself,
// or with ";parameters" (Tomcat, Jetty, Spring).
func dotSegment(seg string) bool {
	seg, _, _ = strings.Cut(seg, ";")
	return seg == "." || seg == ".."
}
