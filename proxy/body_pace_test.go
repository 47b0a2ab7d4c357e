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
// is forwarded whole, and so is a gRPC stream, whatever its pace.
func TestSlowBodyIsCutAtItsPace(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		io.WriteString(w, strings.Repeat("x", int(n%10)))
	}))
	t.Cleanup(up.Close)
	for _, fwd := range []string{"standard", "fast"} {
		for _, tc := range []struct {
			name  string
			ctype string
			piece int // bytes every 250 ms; 1: a byte a second
			total int
			want  int
			after time.Duration // the answer comes no sooner
		}{
			{"a byte a second", "text/plain", 1, 100, 408, 5 * time.Second},
			{"1 KiB a second", "text/plain", 256, 5632, 200, 5 * time.Second},
			// A gRPC stream's messages come when the client has them.
			{"gRPC, a byte a second", "application/grpc", 1, 6, 200, 5 * time.Second},
		} {
			if fwd == "fast" && tc.want == 200 {
				continue // the pace and its exemption are the exchange's, one for both paths
			}
			t.Run(fwd+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				addr, cnt := countedGateway(t, fwd, up.URL, "30s")
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				start := time.Now()
				io.WriteString(conn, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Type: "+tc.ctype+"\r\nContent-Length: "+strconv.Itoa(tc.total)+"\r\n\r\n")
				stop := make(chan struct{})
				defer close(stop)
				every := 250 * time.Millisecond
				if tc.piece == 1 {
					every = time.Second // a byte a second
				}
				go func() {
					for sent := 0; sent < tc.total; sent += tc.piece {
						select {
						case <-stop:
							return
						case <-time.After(every):
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
