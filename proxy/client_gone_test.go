package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestClientLeavingMidAnswerIsNotTargetFailure: clients that hang up while a
// big answer streams (a cancelled download) say nothing about the target,
// which answered 200: on both forwarders it is neither counted as failing
// nor ejected, however many clients do it.
func TestClientLeavingMidAnswerIsNotTargetFailure(t *testing.T) {
	chunk := strings.Repeat("x", 32<<10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(chunk)*256)) // 8 MiB: streamed, not buffered
		for range 256 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(up.Close)
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			gw, uc, g := upstreamGateway(t, fwd, fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
    passive: { consecutiveFailures: 2, ejectFor: 1h, maxEjectedPercent: 100 }
routes:
  - path: /*
    upstream: up
`, up.URL))
			for range 4 {
				c, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
				if err != nil {
					t.Fatal(err)
				}
				io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("answer: %v %v", resp, err)
				}
				if _, err := io.ReadFull(resp.Body, make([]byte, 1000)); err != nil {
					t.Fatal(err)
				}
				c.(*net.TCPConn).SetLinger(0)
				c.Close() // the client gives up on the download
				deadline := time.Now().Add(5 * time.Second)
				for g.Upstreams(g.Now())[0].Targets[0].InFlight != 0 {
					if time.Now().After(deadline) {
						t.Fatal("the abandoned request never ended")
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			tgt := g.Upstreams(g.Now())[0].Targets[0]
			if tgt.Ejected || !tgt.Available || uc.ejected[up.URL] != 0 {
				t.Errorf("a target that answered 200 to clients who left was ejected: %+v", tgt)
			}
			if n := uc.count(up.URL, 0); n != 0 {
				t.Errorf("%d attempts counted as transport errors (code 0), want 0: the target answered 200", n)
			}
		})
	}
}
