package tlsedge

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
)

// With tls.strictSni, a request whose Host is not its connection's SNI is
// answered 421 and never reaches the gateway (so is neither routed, limited
// nor counted); the names compare as the routes' hosts do.
func TestStrictHostRefusesAnotherHostThanTheSNI(t *testing.T) {
	tests := []struct {
		sni, host string
		reached   bool
	}{
		{"shop.example.com", "shop.example.com", true},
		{"shop.example.com", "shop.example.com:8443", true},
		{"shop.example.com", "SHOP.Example.com.", true},
		{"Shop.Example.COM", "shop.example.com", true},
		{"shop.example.com", "api.example.com", false}, // domain fronting
		{"a.example.com", "b.example.com", false},      // both under one wildcard certificate
		{"shop.example.com", "shop.example.com.evil", false},
		{"shop.example.com", "example.com", false},
		{"shop.example.com", "[::1]:8443", false},
		{"shop.example.com", "", false},
	}
	for _, tt := range tests {
		reached := false
		h := StrictHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
		r := httptest.NewRequest("GET", "https://x/api", nil)
		r.Host = tt.host
		r.TLS = &tls.ConnectionState{ServerName: tt.sni}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if reached != tt.reached {
			t.Errorf("SNI %q, Host %q: reached the gateway %v, want %v", tt.sni, tt.host, reached, tt.reached)
		}
		if !tt.reached && w.Code != http.StatusMisdirectedRequest {
			t.Errorf("SNI %q, Host %q: status %d, want 421", tt.sni, tt.host, w.Code)
		}
	}
}
