package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSlowBodyIsCutAtItsPace: a request body must come at 240 bytes a
// second on average once its first 5 s have passed (Kestrel's defaults),
// on both forwarders and whatever the route timeout. A client that sent a
// byte a second held its request's slots (a concurrency rule's, a queue's)
// for the whole 30 s route timeout: five of them kept a route of five
// refusing everyone else (memory audit). Cut, it gets 408, and the
// upstream is charged nothing; a body that keeps the pace (1 KiB a second)
// is forwarded whole.
func TestSlowBodyIsCutAtItsPace(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		io.WriteString(w, strings.Repeat("x", int(n%10)))
	}))
	t.Cleanup(up.Close)
	for _, fwd := range []string{"standard", "fast"} {
		for _, tc := range []struct {
			name  string
			piece int // bytes every 250 ms
			total int
			want  int
			after time.Duration // the answer comes no sooner
		}{
			{"a byte a second", 1, 100, 408, 5 * time.Second},
			{"1 KiB a second", 256, 5632, 200, 5 * time.Second},
		} {
			t.Run(fwd+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				addr, cnt := countedGateway(t, fwd, up.URL, "30s")
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				start := time.Now()
				io.WriteString(conn, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(tc.total)+"\r\n\r\n")
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					for sent := 0; sent < tc.total; sent += tc.piece {
						select {
						case <-stop:
							return
						case <-time.After(250 * time.Millisecond):
						}
						if tc.piece == 1 && sent%4 != 0 {
							continue // a byte a second
						}
						if _, err := conn.Write([]byte(strings.Repeat("b", min(tc.piece, tc.total-sent)))); err != nil {
							return
						}
					}
				}()
				conn.SetReadDeadline(time.Now().Add(20 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				took := time.Since(start)
				if err != nil || resp.StatusCode != tc.want || took < tc.after || took > 15*time.Second {
					t.Fatalf("%v %v after %v; want %d, after %v and well before the 30 s route timeout", resp, err, took, tc.want, tc.after)
				}
				if _, errs := cnt.counts(); errs != 0 {
					t.Errorf("%d upstream errors counted, want 0", errs)
				}
			})
		}
	}
}
