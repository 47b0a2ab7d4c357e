package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestFastPathAllocations bounds the allocations of one request served
// through Gateway.ServeHTTP on the fast path (route match, checks, forward,
// response): the RateLimit headers (2), fasthttp's streamed-body handle
// (4) and the copied response header (2). Routing allocates nothing (it was
// 4 through chi's ServeHTTP; see router.go). The standard path needs about 70.
func TestFastPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	up := startRawUpstream(t, 100)
	g := benchGateway(t, up, "fast")
	req := httptest.NewRequest("GET", "/item/42?x=1", nil)
	req.RemoteAddr = "127.0.0.1:50000"
	w := &discardWriter{h: http.Header{}}
	serve := func() {
		clear(w.h)
		w.status, w.n = 0, 0
		g.ServeHTTP(w, req)
	}
	serve() // warm the pools and the connection
	const limit = 8
	if n := testing.AllocsPerRun(200, serve); n > limit {
		t.Errorf("fast path: %.1f allocations per request, want <= %d", n, limit)
	}
	if w.status != 200 || w.n != 100 {
		t.Fatalf("status %d with %d bytes", w.status, w.n)
	}
}

// TestHostRoutingAllocations: matching the Host (port, case and trailing
// dot dropped, wildcards) adds nothing to the fast path's allocations.
func TestHostRoutingAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	up := startRawUpstream(t, 100)
	g := benchHostGateway(t, up)
	req := httptest.NewRequest("GET", "/item/42?x=1", nil)
	req.RemoteAddr = "127.0.0.1:50000"
	w := &discardWriter{h: http.Header{}}
	for _, host := range []string{"Shop.Example.COM.:8443", "a.b.Example.com", "nohost.test"} {
		req.Host = host
		serve := func() {
			clear(w.h)
			w.status, w.n = 0, 0
			g.ServeHTTP(w, req)
		}
		serve()
		const limit = 8
		if n := testing.AllocsPerRun(200, serve); n > limit {
			t.Errorf("Host %q: %.1f allocations per request, want <= %d", host, n, limit)
		}
		if w.status != 200 || w.n != 100 {
			t.Fatalf("Host %q: status %d with %d bytes", host, w.status, w.n)
		}
	}
}
