package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestBreakerIgnoresAnswersItsClientLeft: a client that gives up before the
// upstream answers says nothing of the upstream's health (rules.md,
// "Failed means"), on either forwarder. The fast path cannot cancel its
// upstream call, which runs on to the upstream's answer: that late answer
// opened a closed breaker (two 500s no client waited for), and decided a
// half-open one (the leaver's probe re-opened it) where the standard path,
// which cancels the call, closed it on the next request.
func TestBreakerIgnoresAnswersItsClientLeft(t *testing.T) {
	var finished atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
		case "/slowfail":
			select { // past its client's patience
			case <-time.After(300 * time.Millisecond):
			case <-r.Context().Done(): // the standard path cancelled the call
				return
			}
			w.WriteHeader(http.StatusInternalServerError)
			finished.Add(1)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
	t.Cleanup(up.Close)
	for _, tt := range []struct {
		name    string
		openIt  bool   // open the breaker first, and let it turn half-open
		retryMs int    // retryTimeoutMs
		leavers int    // clients that leave a /slowfail call
		state   string // what the leavers met
	}{
		{"closed breaker", false, 60000, 2, "closed"},
		{"half-open probe", true, 300, 1, "half-open"},
	} {
		for _, fwd := range []string{"standard", "fast"} {
			t.Run(tt.name+"/"+fwd, func(t *testing.T) {
				gw, _, g := upstreamGateway(t, fwd, fmt.Sprintf(`
upstreams:
  up: {targets: [%q], timeout: 5s}
routes:
  - {path: /*, upstream: up, resource: r}
degradeRules:
  - {resource: r, strategy: errorCount, threshold: 1, minRequestAmount: 1, statIntervalMs: 60000, retryTimeoutMs: %d}
`, up.URL, tt.retryMs))
				if tt.openIt {
					send(t, "GET", gw+"/fail", "", false)
					send(t, "GET", gw+"/fail", "", false)
					if st, _ := send(t, "GET", gw+"/ok", "", false); st != http.StatusTooManyRequests {
						t.Fatalf("after two 500s: %d, want the open breaker's 429", st)
					}
					time.Sleep(time.Duration(tt.retryMs)*time.Millisecond + 50*time.Millisecond)
				}
				before := finished.Load()
				for range tt.leavers {
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					req, _ := http.NewRequestWithContext(ctx, "GET", gw+"/slowfail", nil)
					if resp, err := http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
						t.Fatalf("a /slowfail call was answered (%d) before its client left", resp.StatusCode)
					}
					cancel()
				}
				// The upstream answers what the fast path still waits for;
				// then the gateway has settled the calls.
				deadline := time.Now().Add(5 * time.Second)
				for g.Upstreams(g.Now())[0].Targets[0].InFlight != 0 {
					if time.Now().After(deadline) {
						t.Fatal("the abandoned calls never ended")
					}
					time.Sleep(5 * time.Millisecond)
				}
				if fwd == "fast" && finished.Load()-before != int64(tt.leavers) {
					t.Fatalf("the upstream answered %d of the %d calls whose clients left; the fast path runs each to its answer", finished.Load()-before, tt.leavers)
				}
				if st, _ := send(t, "GET", gw+"/ok", "", false); st != http.StatusOK {
					t.Errorf("%d client(s) left a %s breaker's call before its 500: the next request got %d, want 200", tt.leavers, tt.state, st)
				}
			})
		}
	}
}
