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
	req := httptest.NewRequest("GET", "/", nil)
	req.Host = ""
	rec := httptest.NewRecorder()
	Redirect(":443").ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Errorf("no Host: %d, want 400", rec.Code)
	}
}
