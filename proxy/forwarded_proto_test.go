package proxy

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"
)

// X-Forwarded-Proto is how the client reached sluice: https over TLS,
// whatever the peer says (SPEC §8); over plain HTTP, a trusted proxy's one
// value saying how the client reached it (a load balancer ending TLS in
// front of sluice) is kept, as Traefik keeps it.
// An untrusted peer's value, several values, or one that is neither http nor
// https never reaches the upstream. Forwarders and sources share the one
// function, so the limits read what the upstream gets (oneview tests).
func TestForwardedProto(t *testing.T) {
	s, err := newSources([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		peer   string
		tls    bool
		values []string
		want   string
	}{
		{"10.1.1.1:5000", false, []string{"https"}, "https"}, // the load balancer ended TLS
		{"10.1.1.1:5000", false, []string{"HTTPS"}, "https"},
		{"10.1.1.1:5000", true, []string{"http"}, "https"}, // over TLS, https (SPEC §8), as nginx's $scheme
		{"10.1.1.1:5000", false, nil, "http"},
		{"10.1.1.1:5000", true, nil, "https"},
		{"10.1.1.1:5000", false, []string{"https", "http"}, "http"},
		{"10.1.1.1:5000", false, []string{"https, http"}, "http"},
		{"10.1.1.1:5000", false, []string{"wss"}, "http"},
		{"10.1.1.1:5000", true, []string{"ftp"}, "https"},
		{"192.0.2.7:5000", false, []string{"https"}, "http"}, // not trusted: a client's own claim
		{"192.0.2.7:5000", true, []string{"http"}, "https"},
		{"[::ffff:10.1.1.1]:5000", false, []string{"https"}, "https"},
		{"garbage", false, []string{"https"}, "http"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.peer
		if tt.tls {
			r.TLS = &tls.ConnectionState{}
		} else {
			r.TLS = nil
		}
		if tt.values != nil {
			r.Header["X-Forwarded-Proto"] = tt.values
		}
		if got := s.forwardedProto(r); got != tt.want {
			t.Errorf("peer %s tls %v X-Forwarded-Proto %q: %q, want %q", tt.peer, tt.tls, tt.values, got, tt.want)
		}
	}
	none, _ := newSources(nil)
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr, r.Header["X-Forwarded-Proto"] = "10.1.1.1:5000", []string{"https"}
	if got := none.forwardedProto(r); got != "http" {
		t.Errorf("without trustedProxies a peer's https was kept: %q", got)
	}
}
