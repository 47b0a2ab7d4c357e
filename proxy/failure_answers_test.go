package proxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter/circuit"
)

// bodyCapBreakerGateway serves /* (resource r, maxBodyBytes 100) on one
// target through tr, with an errorCount breaker on r that opens on the 2nd
// failure and probes after 1 s.
func bodyCapBreakerGateway(t *testing.T, tr *fakeTransport) (*Gateway, *stillClock) {
	t.Helper()
	cfg, err := config.Parse("bodycap-breaker.yaml", []byte(`
upstreams:
  up:
    targets: ["http://127.0.0.1:9"]
    passive: {consecutiveFailures: 0}
routes:
  - path: /*
    upstream: up
    resource: r
    forwarder: standard
    maxBodyBytes: 100
degradeRules:
  - resource: r
    strategy: errorCount
    threshold: 1
    minRequestAmount: 1
    statIntervalMs: 10000
    retryTimeoutMs: 1000
`))
	if err != nil {
		t.Fatal(err)
	}
	g, _, clock := fakeGateway(t, cfg, tr)
	return g, clock
}

// TestProbeWithOversizeBodyLeavesBreakerHalfOpen: half-open closes only
// when every probe succeeded, and a probe whose outcome says nothing of
// the upstream gives its slot back (docs/rules.md, Circuit breaking). A
// probe whose client sent a body over maxBodyBytes is answered 413 by the
// gateway, not by the upstream: that answer once reached the breaker as
// the probe's status, a success (not in errorStatuses), and closed the
// breaker in front of an upstream that never answered.
func TestProbeWithOversizeBodyLeavesBreakerHalfOpen(t *testing.T) {
	tr := &fakeTransport{}
	g, clock := bodyCapBreakerGateway(t, tr)
	for range 2 { // two 503s open the breaker
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/x", nil)
		req.Header.Set("X-Fake-Code", "503")
		g.ServeHTTP(w, req)
		if w.Code != 503 {
			t.Fatalf("setup: status %d, want 503", w.Code)
		}
	}
	if st := g.Current().Breakers.States()["r"]; st != circuit.Open {
		t.Fatalf("setup: breaker %v, want open", st)
	}
	clock.now += int64(1100 * time.Millisecond)
	// The probe: a chunked upload over maxBodyBytes; the upstream resets
	// after reading what it got (it never answered).
	tr.script = []step{{err: errReset}}
	w := httptest.NewRecorder()
	body := io.MultiReader(strings.NewReader(strings.Repeat("x", 500))) // unknown length
	g.ServeHTTP(w, httptest.NewRequest("POST", "/x", body))
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("probe: status %d, want 413", w.Code)
	}
	if st := g.Current().Breakers.States()["r"]; st == circuit.Closed {
		t.Errorf("a probe that never got the upstream's answer (client body over the cap, 413) closed the breaker; want it still half-open (slot given back) or open")
	}
}

// TestConnectTimeoutIs502: 504 is the route's timeout (docs/configuration.md,
// blocked and failed requests); a dial past connectTimeout is a connect
// failure (docs/upstreams.md): when every attempt's dial times out (a
// target behind a firewall that drops SYNs) the retries are made and the
// client gets 502 "upstream unreachable" on both paths, not 504.
func TestConnectTimeoutIs502(t *testing.T) {
	_, dialErr := (&net.Dialer{Timeout: time.Nanosecond}).Dial("tcp", "127.0.0.1:9")
	if dialErr == nil {
		t.Skip("the dial did not time out")
	}
	errDialTimeout := &connectError{dialErr} // as newTransport's and the fast clients' dialers wrap it
	if classify(errDialTimeout) != failConnect {
		t.Fatalf("setup: a dial timeout is not a connect failure")
	}
	for _, path := range []string{"fast", "standard"} {
		t.Run(path, func(t *testing.T) {
			tr := &fakeTransport{whole: path == "fast", script: []step{{err: errDialTimeout}, {err: errDialTimeout}, {err: errDialTimeout}}}
			g, _, _ := policyGateway(t, path, tr)
			w := httptest.NewRecorder()
			g.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
			if len(tr.sent) != 3 {
				t.Errorf("%d attempts, want 3 (a connect failure is retried)", len(tr.sent))
			}
			if w.Code != http.StatusBadGateway || w.Body.String() != string(bodyBadGateway) {
				t.Errorf("every dial timed out (connectTimeout), the route timeout did not: got %d %q, want 502 %q",
					w.Code, w.Body, bodyBadGateway)
			}
		})
	}
}
