package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sluice/proxy"
)

// slowUpstream answers after taking its time on the synthetic clock.
type slowUpstream struct {
	clock *fakeClock
	takes time.Duration
}

func (u *slowUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	u.clock.advance(u.takes)
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")),
		ContentLength: 2, Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// slowReader is a client that takes its time reading the answer: each write
// to it takes reads on the synthetic clock.
type slowReader struct {
	*httptest.ResponseRecorder
	clock *fakeClock
	reads time.Duration
}

func (w *slowReader) Write(b []byte) (int, error) {
	w.clock.advance(w.reads)
	return w.ResponseRecorder.Write(b)
}

// A slowRatio breaker judges the upstream's time (SPEC §6's maxAllowedRtMs:
// "a response slower than this is slow"), which is neither the time the
// gateway's own throttle queue held the call nor the time the client took
// to read the answer. Counting either would let the gateway's queue, or a
// few clients reading large answers slowly, open the breaker for every
// client of a healthy upstream.
func TestSlowRatioJudgesTheUpstreamsTime(t *testing.T) {
	const breaker = `
degradeRules:
  - resource: item
    strategy: slowRatio
    maxAllowedRtMs: 100
    threshold: 0.5
    minRequestAmount: 2
    statIntervalMs: 60000
    retryTimeoutMs: 60000
`
	tests := []struct {
		name     string
		rules    string
		upstream time.Duration // the upstream's time to answer
		client   time.Duration // the client's time to read each write
		calls    int           // at one instant, each queued behind the one before
		open     bool          // the breaker opens: the next call is refused
	}{
		{"a slow upstream opens it", breaker, time.Second, 0, 2, true},
		{"a fast upstream behind a 1 s queue does not", breaker + `
flowRules:
  - resource: item
    count: 1
    controlBehavior: throttle
    maxQueueingTimeMs: 10000
`, 0, 0, 3, false},
		{"a fast upstream read by slow clients does not", breaker, 0, 5 * time.Second, 3, false},
		{"a slow upstream read by slow clients still does", breaker, time.Second, 5 * time.Second, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, clock, _ := stubGateway(t, itemRoute+tt.rules, func(d *proxy.Deps) { d.Transport = &slowUpstream{d.Clock.(*fakeClock), tt.upstream} })
			call := func() *httptest.ResponseRecorder {
				w := &slowReader{httptest.NewRecorder(), clock, tt.client}
				g.ServeHTTP(w, httptest.NewRequest("GET", "/item/1", nil))
				return w.ResponseRecorder
			}
			for i := range tt.calls {
				if w := call(); w.Code != 200 {
					t.Fatalf("call %d: %d %s", i, w.Code, w.Header().Get("X-Sluice-Blocked"))
				}
			}
			w := call()
			if opened := w.Header().Get("X-Sluice-Blocked") == "degrade"; opened != tt.open {
				t.Errorf("after %d calls the breaker is open: %v, want %v (the next call got %d)", tt.calls, opened, tt.open, w.Code)
			}
		})
	}
}
