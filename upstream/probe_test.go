package upstream_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"sluice/upstream"
)

// TestHTTPProbe: a probe is good on 2xx and 3xx (not followed) within the
// timeout; 4xx, 5xx, a slow answer and a refused connection are bad.
func TestHTTPProbe(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(204)
		case "/moved":
			http.Redirect(w, r, "/nowhere", http.StatusFound)
		case "/missing":
			w.WriteHeader(404)
		case "/sick":
			w.WriteHeader(503)
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/ok"
	ln.Close()

	probe := upstream.HTTPProbe()
	for _, c := range []struct {
		url  string
		good bool
	}{
		{srv.URL + "/ok", true},
		{srv.URL + "/moved", true},
		{srv.URL + "/missing", false},
		{srv.URL + "/sick", false},
		{srv.URL + "/slow", false},
		{refused, false},
	} {
		start := time.Now()
		if got := probe(context.Background(), upstream.Probe{URL: c.url, Timeout: 200 * time.Millisecond}); got != c.good {
			t.Errorf("probe %s: %v, want %v", c.url, got, c.good)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("probe %s took %v, past its timeout", c.url, d)
		}
	}

	// A target that speaks only HTTP/2 without TLS (a gRPC server's plain
	// port) is probed with prior knowledge when the upstream says h2c.
	h2c := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			w.WriteHeader(http.StatusHTTPVersionNotSupported)
		}
	}))
	h2c.Config.Protocols = new(http.Protocols)
	h2c.Config.Protocols.SetUnencryptedHTTP2(true)
	h2c.Start()
	defer h2c.Close()
	if !probe(context.Background(), upstream.Probe{URL: h2c.URL + "/ok", Protocol: "h2c", Timeout: time.Second}) {
		t.Error("h2c probe of an HTTP/2-only target: bad, want good")
	}
	if probe(context.Background(), upstream.Probe{URL: h2c.URL + "/ok", Protocol: "http1", Timeout: time.Second}) {
		t.Error("HTTP/1.1 probe of an HTTP/2-only target: good, want bad")
	}
}
