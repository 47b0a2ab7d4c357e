package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
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

// TestClientLeavingFreesItsSlot: a client that leaves before the answer
// gives its slot in flight back at once (SPEC §3: "always released, also
// on client cancel"), whichever rule counts it (a relate rule reads another
// resource's), for a request with a body or without, and the upstream call
// is cancelled: the upstream sees its client go, as it would the client
// itself. A client that left is not counted as the upstream's failure. The
// fast path cannot cancel its upstream call, and held the slot until the
// upstream answered (here 20 s, the route timeout), so auto sends the
// routes whose calls hold a slot the standard path.
func TestClientLeavingFreesItsSlot(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan string, 16)
	var running atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.HasPrefix(r.URL.Path, "/slow") {
			running.Add(1)
			defer running.Add(-1)
			arrived <- r.URL.Path
			select {
			case <-release:
			case <-r.Context().Done(): // the gateway cancelled the call
			case <-time.After(20 * time.Second):
			}
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(release) })
	rules := map[string]string{
		"flow":   `flowRules: [{ resource: r, grade: concurrency, count: 1 }]`,
		"param":  `paramRules: [{ resource: r, param: ip, grade: concurrency, count: 1 }]`,
		"system": `system: { maxConcurrency: 1 }`,
		"group": `
apiGroups: [{ name: grp, match: [{ prefix: / }] }]
flowRules: [{ resource: grp, grade: concurrency, count: 1 }]`,
		// /w is refused while a call of r is in flight.
		"relate": `flowRules: [{ resource: w, grade: concurrency, count: 1, strategy: relate, refResource: r }]`,
	}
	requests := map[string]string{
		"GET":  "GET /slow HTTP/1.1\r\nHost: gw\r\n\r\n",
		"POST": "POST /slow HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\n\r\nhello",
	}
	for _, fwd := range []string{"standard", "auto"} {
		for rule, yaml := range rules {
			gw, uc, _ := upstreamGateway(t, fwd, fmt.Sprintf(`
upstreams: { up: { targets: [%q], timeout: 20s } }
routes:
  - { path: /w/*, upstream: up, resource: w, stripPrefix: /w }
  - { path: /*, upstream: up, resource: r }
%s
`, up.URL, yaml))
			for method, raw := range requests {
				c, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
				if err != nil {
					t.Fatal(err)
				}
				io.WriteString(c, raw)
				select {
				case <-arrived: // the call holds its slot, and the upstream has it
				case <-time.After(5 * time.Second):
					t.Fatalf("%s %s %s: the upstream never got the request", fwd, rule, method)
				}
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
				probe := "/ok" // a call of r, or any call under the system's or the group's rule
				if rule == "relate" {
					probe = "/w/ok"
				}
				if waited, ok := passesWithin(gw+probe, 3*time.Second); !ok {
					t.Errorf("%s, %s rule, %s: the slot of a client that left is still held after %v", fwd, rule, method, waited)
				}
				deadline := time.Now().Add(3 * time.Second)
				for running.Load() != 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if n := running.Load(); n != 0 {
					t.Errorf("%s, %s rule, %s: %d calls of clients that left still run upstream", fwd, rule, method, n)
				}
			}
			if n := uc.count(up.URL, 0); n != 0 {
				t.Errorf("%s, %s rule: %d attempts counted as transport errors, want 0: the client left", fwd, rule, n)
			}
		}
	}
}

// passesWithin asks GET url until it is answered 200, for at most within,
// and says how long it asked.
func passesWithin(url string, within time.Duration) (time.Duration, bool) {
	start := time.Now()
	for {
		resp, err := http.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return time.Since(start), true
			}
		}
		if time.Since(start) > within {
			return time.Since(start).Round(time.Millisecond), false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHalfClosedClientGetsNoMadeUpAnswer: a client that sends its request
// and then shuts its side down (net/http takes that for leaving, and
// cancels the request) gets no 200 the upstream never gave. The standard
// path cancels the upstream call; the gateway then cuts the connection,
// as nginx does, where net/http answered 200 with no body in place of the
// handler that wrote nothing: a POST that reached the upstream looked done
// and empty. The fast path cannot cancel its call, and answers such a
// client as any other.
func TestHalfClosedClientGetsNoMadeUpAnswer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
		}
		io.WriteString(w, "real")
	}))
	t.Cleanup(up.Close)
	gw, _, _ := upstreamGateway(t, "", fmt.Sprintf(`
upstreams: { up: { targets: [%q], timeout: 5s } }
routes:
  - { path: /held, upstream: up, resource: held }
  - { path: /plain, upstream: up, resource: plain }
flowRules: [{ resource: held, grade: concurrency, count: 10 }]
`, up.URL))
	for path, want := range map[string]string{"/held": "", "/plain": "real"} {
		c, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi", path)
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil && !(want == "" && errors.Is(err, syscall.ECONNRESET)) { // a reset cuts it too
			t.Fatalf("%s: %v", path, err)
		}
		switch {
		case want == "" && len(got) > 0:
			t.Errorf("%s: a client that half-closed got %q, want the connection cut", path, got)
		case want != "" && !strings.HasSuffix(string(got), want):
			t.Errorf("%s: a client that half-closed got %q, want the upstream's %q", path, got, want)
		}
	}
}
