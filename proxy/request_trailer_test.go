package proxy_test

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestRequestTrailersAreNotForwarded: a client's request trailers reach no
// upstream, on either forwarder: the limits read the head only, and an
// upstream that merges trailers into the fields would read one no limit
// saw. Nor is a Trailer field announcing them sent (net/http wrote one from
// its copy of the request and then no trailer: the smuggling audit). The
// body arrives whole.
func TestRequestTrailersAreNotForwarded(t *testing.T) {
	got := make(chan string, 1)
	up := serveConns(t, func(c net.Conn) {
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		b, _ := io.ReadAll(c)
		got <- string(b)
	})
	for _, fwd := range []string{"standard", "fast"} {
		gw, _ := countedGateway(t, fwd, "http://"+up.Addr().String(), "1s")
		rawRoundTrip(t, gw, "POST /x HTTP/1.1\r\nHost: gw\r\nTrailer: X-Key\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"+
			"5\r\nhello\r\n0\r\nX-Key: victim\r\n\r\n", 700*time.Millisecond)
		var sent string
		select {
		case sent = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing reached the upstream", fwd)
		}
		head, body, _ := strings.Cut(sent, "\r\n\r\n")
		if strings.Contains(strings.ToLower(head), "\r\ntrailer:") || strings.Contains(sent, "victim") || body != "5\r\nhello\r\n0\r\n\r\n" {
			t.Errorf("%s: the upstream got %q, want the body and neither the trailer nor a Trailer field", fwd, sent)
		}
	}
}
