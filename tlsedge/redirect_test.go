package tlsedge

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRedirect(t *testing.T) {
	tests := []struct {
		tlsAddr, method, host, uri, want string
	}{
		{":443", "GET", "shop.example.com", "/a/b?x=1&y=%2F", "https://shop.example.com/a/b?x=1&y=%2F"},
		{":443", "POST", "shop.example.com:80", "/order", "https://shop.example.com/order"},
		{":8443", "GET", "shop.example.com:8080", "/", "https://shop.example.com:8443/"},
		{"127.0.0.1:8443", "GET", "[::1]:8080", "/x", "https://[::1]:8443/x"},
		{":443", "GET", "[::1]:8080", "/x", "https://[::1]/x"},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, tt.uri, nil)
		req.Host = tt.host
		rec := httptest.NewRecorder()
		Redirect(tt.tlsAddr).ServeHTTP(rec, req)
		if rec.Code != http.StatusPermanentRedirect || rec.Header().Get("Location") != tt.want {
			t.Errorf("%s %s%s to %s: %d %q, want 308 %q", tt.method, tt.host, tt.uri, tt.tlsAddr, rec.Code, rec.Header().Get("Location"), tt.want)
		}
	}
	// No Host, or a target that is no path (asterisk-form), cannot be
	// redirected: the Location would be malformed (https://host*).
	for _, bad := range []struct{ method, host, uri string }{
		{"GET", "", "/"},
		{"GET", "y.test", "*"},
		{"OPTIONS", "y.test", "*"},
		// What the TLS listener refuses (SPEC §11) is refused here too,
		// not made into a Location (the edge audit of 2026-12-07 had
		// https://b.test/a%23frag and https://[b.test:19503:1]:19504/p).
		{"GET", "y.test", "/a#frag"},
		{"GET", "y.test:80:1", "/p"},
		{"GET", "y..test", "/p"},
		{"GET", "y.test,", "/p"},
		{"GET", "[y.test]", "/p"},
	} {
		req := httptest.NewRequest(bad.method, bad.uri, nil)
		req.Host = bad.host
		rec := httptest.NewRecorder()
		Redirect(":8443").ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Location") != "" {
			t.Errorf("%s %s with Host %q: %d %q, want 400 and no Location", bad.method, bad.uri, bad.host, rec.Code, rec.Header().Get("Location"))
		}
	}
	// CONNECT is 405 on the TLS listener: not redirected either.
	req := httptest.NewRequest("CONNECT", "/", nil)
	req.Host = "victim.example:443"
	rec := httptest.NewRecorder()
	Redirect(":8443").ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Location") != "" {
		t.Errorf("CONNECT: %d %q, want 405 and no Location", rec.Code, rec.Header().Get("Location"))
	}
}
