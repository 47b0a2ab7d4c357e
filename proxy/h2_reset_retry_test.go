package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// h2cUpstream is an upstream that speaks h2c (HTTP/2 without TLS) alone,
// closed when the test ends.
func h2cUpstream(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestH2StreamResetIsRetried: over an h2c upstream, a target that resets
// the request's stream before any byte of the answer (RST_STREAM, HTTP/2's
// reset) is a reset as a TCP one is (SPEC section 9): a GET is sent to the
// next target, a POST, which the target may have acted on, is not (502).
// Before, a stream reset was no reset, and the GET got 502 too.
func TestH2StreamResetIsRetried(t *testing.T) {
	var resets, good atomic.Int64
	bad := h2cUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		resets.Add(1)
		io.Copy(io.Discard, r.Body)
		panic(http.ErrAbortHandler) // RST_STREAM before any byte of the answer
	})
	ok := h2cUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		good.Add(1)
		io.WriteString(w, "ok")
	})
	gw, _, _ := upstreamGateway(t, "", fmt.Sprintf(`
upstreams: { up: { targets: [%q, %q], protocol: h2c, retries: 1 } }
routes: [{ path: /*, upstream: up, resource: r }]
`, bad.URL, ok.URL))
	for _, tc := range []struct {
		method string
		want   int
	}{{"GET", 200}, {"POST", 502}} {
		resets.Store(0)
		good.Store(0)
		// Round robin starts each pair of requests with the first target.
		for i := range 2 {
			req, _ := http.NewRequest(tc.method, gw+"/x", strings.NewReader("v=1"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if i == 0 && resp.StatusCode != tc.want {
				t.Errorf("%s on a stream the target reset: %d, want %d", tc.method, resp.StatusCode, tc.want)
			}
		}
		if resets.Load() != 1 {
			t.Errorf("%s: the resetting target got %d, want 1", tc.method, resets.Load())
		}
	}
}
