package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestHTTP10ExpectIsIgnored: an HTTP/1.0 client's Expect: 100-continue is
// ignored (RFC 9110 §10.1.1), not forwarded: an upstream that honoured it
// sent 100 Continue, which reached the client as "HTTP/1.0 100 Continue",
// a 1xx no HTTP/1.0 client may be sent (§15.2; the smuggling audit). The
// body is forwarded whole, on both forwarders, and an HTTP/1.1 client's
// expectation is still met.
func TestHTTP10ExpectIsIgnored(t *testing.T) {
	var sawExpect atomic.Int32
	up := serveConns(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if r.Header.Get("Expect") != "" {
				sawExpect.Add(1)
				_, _ = io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
			}
			b, _ := io.ReadAll(r.Body)
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(b))+"\r\n\r\n"+string(b))
		}
	})
	for _, fwd := range []string{"standard", "fast"} {
		sawExpect.Store(0)
		gw, _ := countedGateway(t, fwd, "http://"+up.Addr().String(), "2s")
		got := rawRoundTrip(t, gw, "POST /x HTTP/1.0\r\nHost: gw\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello", time.Second)
		if strings.Contains(got, " 100 ") || !strings.HasPrefix(got, "HTTP/1.0 200") || !strings.HasSuffix(got, "hello") {
			t.Errorf("%s: an HTTP/1.0 client got %q, want 200 with its body echoed and no 100", fwd, got)
		}
		if n := sawExpect.Load(); n != 0 {
			t.Errorf("%s: the upstream was sent an HTTP/1.0 client's Expect", fwd)
		}
	}
}
