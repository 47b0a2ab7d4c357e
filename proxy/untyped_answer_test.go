package proxy_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// TestUntypedAnswerStaysUntyped: an upstream's answer without a
// Content-Type reaches the client without one, on both forwarders, over
// HTTP/1.1 and h2c. net/http guessed one from the body: an HTML body the
// upstream sent untyped, with "X-Content-Type-Options: nosniff", reached
// a browser as text/html (TLS audit); nginx and Envoy add none.
func TestUntypedAnswerStaysUntyped(t *testing.T) {
	const page = "<html><script>alert(1)</script></html>"
	up := rawServe(t, func(r *http.Request, c net.Conn) bool {
		_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nX-Content-Type-Options: nosniff\r\nContent-Length: %d\r\n\r\n%s", len(page), page)
		return true
	})
	for _, fwd := range []string{"standard", "fast"} {
		gw := "http://" + h2cGateway(t, fwd, fmt.Sprintf("upstreams:\n  up:\n    targets: [%q]\nroutes:\n  - path: /*\n    upstream: up\n", up))
		for _, h2 := range []bool{false, true} {
			tr := &http.Transport{Protocols: new(http.Protocols)}
			if h2 {
				tr.Protocols.SetUnencryptedHTTP2(true)
			} else {
				tr.Protocols.SetHTTP1(true)
			}
			resp, err := (&http.Client{Transport: tr}).Get(gw + "/page")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			tr.CloseIdleConnections()
			if ct, ok := resp.Header["Content-Type"]; ok || string(body) != page || resp.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] {
				t.Errorf("%s forwarder, HTTP/%d: Content-Type %q (set %v), body %q; want none and the page", fwd, resp.ProtoMajor, ct, ok, body)
			}
		}
	}
}
