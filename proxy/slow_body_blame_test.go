package proxy_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/internal/stallwatch"
)

// TestSlowUploadIsTheClientsFault: a client that sends part of its body
// and then trickles the rest past the route timeout is answered 408, and
// the target, which read every byte it was given, is not charged: on both
// forwarders, for many such uploads at once. The route deadline and the
// client body's read deadline fall together, and when the transport saw its
// deadline before the body's reader saw its own, the stall was charged to
// the target as its timeout (504; 2 of 24 in a run): slow uploads alone
// could eject a healthy target. A target that stops reading a fast
// client's body is still the one at fault (504, charged).
func TestSlowUploadIsTheClientsFault(t *testing.T) {
	reads := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(reads.Close)
	stuck := make(chan struct{})
	hangs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // reads nothing
		case <-stuck:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hangs.Close)
	t.Cleanup(func() { close(stuck) })
	for _, tc := range []struct {
		name    string
		up      string
		uploads int
		timeout string
		body    int           // bytes announced
		piece   int           // after 100 KiB, a piece of this size...
		every   time.Duration // ...this often for 500 ms (0: all at once)
		want    string
		charged bool
	}{
		{"client trickles", reads.URL, 24, "300ms", 200 << 10, 1 << 10, 10 * time.Millisecond, "408", false},
		// Pieces every 1 ms: no Read waits long, yet the body is on its way.
		{"client sends small pieces", reads.URL, 32, "300ms", 10 << 20, 64, time.Millisecond, "408", false},
		// More than the socket buffers between the gateway and the target
		// hold (about 10 MiB here), so the forwarder is stuck writing long
		// before the timeout, however slow a -race build copies.
		{"target stops reading", hangs.URL, 2, "2s", 32 << 20, 0, 0, "504", true},
	} {
		for _, fwd := range []string{"standard", "fast"} {
			t.Run(tc.name+"/"+fwd, func(t *testing.T) {
				gw, uc, g := upstreamGateway(t, fwd, fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
    timeout: %s
    passive: {consecutiveFailures: 1000, ejectFor: 1h, maxEjectedPercent: 100}
routes: [{path: /*, upstream: up, resource: r}]
`, tc.up, tc.timeout))
				uploads := tc.uploads
				codes := make(chan string, uploads)
				stalls := stallwatch.Start(t)
				var wg sync.WaitGroup
				for range uploads {
					wg.Go(func() { codes <- upload(gw, tc.body, tc.piece, tc.every) })
				}
				wg.Wait()
				close(codes)
				got := map[string]int{}
				for c := range codes {
					got[c]++
				}
				deadline := time.Now().Add(5 * time.Second)
				for g.Upstreams(g.Now())[0].Targets[0].InFlight != 0 && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				charged := uc.count(tc.up, 0)
				wrong := got[tc.want] != uploads || tc.charged && charged != uploads || !tc.charged && charged != 0
				if worst := stalls.Take(); wrong && worst >= clientStall/2 {
					// The gateway judges by whether it was kept from
					// reading the body for clientStall (proxy/exchange.go):
					// a process not run for as long is judged as a stuck
					// write, and a client not run as a slow client. That
					// is the machine's, not the verdict's (under load: 1 to
					// 3 of 24 trickled uploads answered 504, with this
					// watch's goroutine 92 ms late at worst; it is not the
					// forwarder's, hence half of clientStall).
					t.Logf("answers %v, %d charged, while a goroutine of this test went unrun for %v (clientStall %v): the machine's, not counted", got, charged, worst, clientStall)
					return
				}
				if got[tc.want] != uploads {
					t.Errorf("answers to %d uploads: %v, want %s to each", uploads, got, tc.want)
				}
				if tc.charged && charged != uploads || !tc.charged && charged != 0 {
					t.Errorf("%d of %d uploads charged to the target as its failure, want all: %v", charged, uploads, tc.charged)
				}
			})
		}
	}
}

// clientStall is proxy's clientStall: a gap in reading the body that
// long is a stuck write to the upstream.
const clientStall = 100 * time.Millisecond

// upload sends a POST announcing n bytes of body over its own connection:
// all at once (every 0), or 100 KiB (more than a forwarder keeps, so the
// body streams) and then a piece of the given size every so often for
// 500 ms, past the route timeout. It returns the answer's status code (or
// the error).
func upload(gw string, n, piece int, every time.Duration) string {
	c, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", n)
	if every == 0 {
		go func() { _, _ = c.Write(make([]byte, n)) }() // as much as the gateway takes
	} else {
		_, _ = c.Write(make([]byte, 100<<10))
		for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
			time.Sleep(every)
			if _, err := c.Write(make([]byte, piece)); err != nil {
				break
			}
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	status := make([]byte, 12)
	if _, err := io.ReadFull(c, status); err != nil {
		return err.Error()
	}
	return string(status[9:12])
}
