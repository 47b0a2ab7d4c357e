package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
)

// deadlineTransport is a transport whose first attempt of a request lasts
// until the route deadline and then fails as a dial cut by that deadline
// does (or answers firstCode at the deadline), and whose later attempts
// behave as the real clients do once the deadline has passed: they fail at
// once, with nothing sent.
type deadlineTransport struct {
	firstCode int // 0: the first attempt is a dial cut by the deadline

	mu      sync.Mutex
	calls   map[*prepared]int
	targets []int
	late    int // attempts started after the deadline
}

func (f *deadlineTransport) name() string                      { return "deadline" }
func (f *deadlineTransport) keeps() bool                       { return true }
func (f *deadlineTransport) bodyBuf(_ *prepared, n int) []byte { return make([]byte, n) }
func (f *deadlineTransport) open(p *prepared) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[*prepared]int{}
	}
	f.calls[p] = 0
}
func (f *deadlineTransport) close(p *prepared) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.calls, p)
}

func (f *deadlineTransport) send(p *prepared) (int, error) {
	f.mu.Lock()
	n := f.calls[p]
	f.calls[p]++
	f.targets = append(f.targets, p.target)
	late := !time.Now().Before(p.deadline)
	if n > 0 && late {
		f.late++
	}
	f.mu.Unlock()
	if n == 0 {
		time.Sleep(time.Until(p.deadline) + 5*time.Millisecond)
		if f.firstCode == 0 {
			// net.Dialer maps a context deadline to an i/o timeout.
			return 0, &connectError{&net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}}
		}
		if p.mayDrop(f.firstCode) {
			return f.firstCode, errDropped
		}
		p.ex.Header().Set("Retry-After", "7")
		p.ex.WriteHeader(f.firstCode)
		return f.firstCode, nil
	}
	if late {
		return 0, context.DeadlineExceeded
	}
	p.ex.WriteHeader(http.StatusOK)
	return http.StatusOK, nil
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestNoRetryPastRouteTimeout: once the route timeout has expired (a
// dial to a black-holed target that lasted as long as the timeout, which
// the default connectTimeout does whenever timeout is under 2s), the
// request is not "retried" to another target: nothing can be sent any
// more, yet such a retry counted a retry, charged a target that never saw
// the request with a failure (passive ejection), and a failure answer
// taken for a retry at the deadline was replaced by the gateway's 504.
func TestNoRetryPastRouteTimeout(t *testing.T) {
	for _, c := range []struct {
		name      string
		firstCode int
		status    int
	}{
		{"dial cut by the deadline", 0, http.StatusGatewayTimeout},
		{"503 at the deadline", http.StatusServiceUnavailable, http.StatusServiceUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := config.Parse("deadline.yaml", []byte(`
upstreams:
  up:
    targets: ["http://127.0.0.1:9", "http://127.0.0.2:9", "http://127.0.0.3:9"]
    timeout: 100ms
    retries: 2
routes:
  - path: /*
    upstream: up
    resource: r
`))
			if err != nil {
				t.Fatal(err)
			}
			obs, clock := &countingObserver{}, &stillClock{now: int64(time.Hour)}
			g := New(Deps{Log: zerolog.Nop(), Clock: clock, Observer: func(string) Observer { return obs }})
			if err := g.Load(cfg); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.Close)
			tr := &deadlineTransport{firstCode: c.firstCode}
			for _, rt := range g.Current().router.any.everyRoute() {
				fwd := struct{ fakeForwarderT }{fakeForwarderT{rt, tr}}
				rt.std = fwd
				if rt.fast != nil {
					rt.fast = fwd
				}
			}
			w := httptest.NewRecorder()
			g.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
			if w.Code != c.status {
				t.Errorf("status %d, want %d", w.Code, c.status)
			}
			if tr.late != 0 || len(tr.targets) != 1 {
				t.Errorf("attempts to targets %v, %d after the route timeout; want one attempt", tr.targets, tr.late)
			}
			st := g.Upstreams(clock.now)[0]
			if st.RetriesPerSecond != 0 {
				t.Errorf("upstream counts %v retries per second, want none", st.RetriesPerSecond)
			}
			for i, ts := range st.Targets {
				want := 0.0
				if i == tr.targets[0] {
					want = 1 // one attempt over the last second
				}
				if ts.ErrorsPerSecond != want || ts.InFlight != 0 {
					t.Errorf("target %s: %v errors/s, %d in flight; want %v, 0", ts.URL, ts.ErrorsPerSecond, ts.InFlight, want)
				}
			}
		})
	}
}

// fakeForwarderT puts any transport under the attempts loop.
type fakeForwarderT struct {
	rt *route
	tr transport
}

func (f fakeForwarderT) forward(ex *exchange, r *http.Request) {
	f.rt.attempts(ex, r, f.tr, zerolog.Nop())
}
func (f fakeForwarderT) name() string { return "fake" }
