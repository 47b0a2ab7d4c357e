package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// sizedUpstream answers /n/{size} with size bytes and their
// Content-Length, as most upstreams do.
func sizedUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:])
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Query().Has("trailer") {
			// Announced, and never sent: the body is framed by its length.
			w.Header().Set("Trailer", "X-Checksum")
		}
		_, _ = io.WriteString(w, strings.Repeat("x", n))
	}))
	t.Cleanup(up.Close)
	return up
}

// Every answer of a known length reaches an HTTP/1.1 client with that one
// Content-Length, never chunked, on both forwarders: the fast path leaves
// the field of an answer of up to 2,048 bytes to net/http, which must write
// the upstream's value, and copies a longer one's, or one that announces
// trailers (net/http would chunk it).
func TestAnswerKeepsItsContentLengthAtEverySize(t *testing.T) {
	up := sizedUpstream(t)
	for _, fwd := range []string{"fast", "standard"} {
		t.Run(fwd, func(t *testing.T) {
			srv := rulesGateway(t, fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
routes:
  - { path: "/n/{size}", upstream: up, resource: n, forwarder: %s }
`, up.URL, fwd))
			for _, target := range []string{"/n/0", "/n/1", "/n/100", "/n/2047", "/n/2048", "/n/2049", "/n/4096", "/n/70000", "/n/100?trailer"} {
				n, _ := strconv.Atoi(strings.TrimSuffix(target[len("/n/"):], "?trailer"))
				resp, body, head := rawRequestHead(t, srv.Listener.Addr().String(), "GET", target)
				if resp.StatusCode != http.StatusOK || len(body) != n {
					t.Fatalf("%s: status %d, %d bytes", target, resp.StatusCode, len(body))
				}
				if got := strings.Count(strings.ToLower(head), "\r\ncontent-length: "); got != 1 || resp.ContentLength != int64(n) || len(resp.TransferEncoding) > 0 {
					t.Fatalf("%s: %d Content-Length fields, length %d, Transfer-Encoding %v:\n%s", target, got, resp.ContentLength, resp.TransferEncoding, head)
				}
			}
		})
	}
}

// A param rule that takes its cost from the answer's Content-Length still
// reads it where net/http writes the field: a 2,000-byte answer costs 2,000
// tokens of 3,000, so the third call is refused.
func TestCostFromContentLength(t *testing.T) {
	up := sizedUpstream(t)
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keepCostHeaders=%v", keep), func(t *testing.T) {
			srv := rulesGateway(t, fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
routes:
  - { path: "/n/{size}", upstream: up, resource: n, forwarder: fast, keepCostHeaders: %v }
paramRules:
  - resource: n
    param: header:X-Key
    count: 3000
    durationSec: 3600
    countOn: "responseHeader:Content-Length"
`, up.URL, keep))
			for i, want := range []int{200, 200, 429} {
				resp, _, head := rawRequestHead(t, srv.Listener.Addr().String(), "GET", "/n/2000", "X-Key: k")
				if resp.StatusCode != want {
					t.Fatalf("call %d: %d, want %d", i, resp.StatusCode, want)
				}
				if want == 200 && resp.ContentLength != 2000 {
					t.Fatalf("call %d: Content-Length %d, want 2000:\n%s", i, resp.ContentLength, head)
				}
			}
		})
	}
}
