package proxy_test

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAnswerCutBeforeTheClientGotAnyIs502: an upstream whose answer of a
// known length up to 64 KiB breaks (a reset or a close after part of its
// body) has sent the client nothing yet: both forwarders read such a body
// whole before the status goes out, so the client gets the gateway's 502
// and one error is counted, and the request, answered in part, is not sent
// again. The standard path wrote the status into net/http's buffer and
// then aborted: the client got an empty reply, not a word from the
// gateway. A longer answer is streamed, so its cut reaches the client as a
// cut response on both.
func TestAnswerCutBeforeTheClientGotAnyIs502(t *testing.T) {
	for _, c := range []struct {
		name   string
		length int // declared; a tenth of it is sent
		reset  bool
		want   int // 0: a cut response
	}{
		{"1000 B, closed", 1000, false, 502},
		{"1000 B, reset", 1000, true, 502},
		{"64 KiB, closed", 64 << 10, false, 502},
		{"64 KiB + 1, closed", 64<<10 + 1, false, 0},
	} {
		for _, fwd := range []string{"standard", "fast"} {
			var got atomic.Int64
			up := rawServe(t, func(r *http.Request, conn net.Conn) bool {
				got.Add(1)
				io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(c.length)+"\r\n\r\n")
				conn.Write(make([]byte, c.length/10))
				if c.reset {
					conn.(*net.TCPConn).SetLinger(0)
				}
				return false
			})
			gw, cnt := countedGateway(t, fwd, up, "2s")
			b := rawRoundTrip(t, gw, "GET /x HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n", time.Second)
			switch {
			case c.want == 502 && !(strings.HasPrefix(b, "HTTP/1.1 502") && strings.Contains(b, `"upstream unreachable"`)):
				t.Errorf("%s, %s: client got %.60q, want the gateway's 502", c.name, fwd, b)
			case c.want == 0 && (!strings.HasPrefix(b, "HTTP/1.1 200") || len(b) >= c.length):
				t.Errorf("%s, %s: client got %d bytes starting %.30q, want a 200 cut short", c.name, fwd, len(b), b)
			}
			if _, errs := cnt.counts(); errs != 1 {
				t.Errorf("%s, %s: %d errors counted, want 1", c.name, fwd, errs)
			}
			if n := got.Load(); n != 1 {
				t.Errorf("%s, %s: the upstream saw the GET %d times, want once: it answered", c.name, fwd, n)
			}
		}
	}
}
