package e2e

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestPrioritizedCalls: a burst of 10 prioritized calls on a route of 5 a
// second all pass within occupyTimeoutMs (1 s), 5 at once and 5 when the
// first leave the window, and no second at the upstream holds more than 5
// of them; a plain call on a route like it is refused at once; and a
// prioritized caller that leaves while waiting frees its slot, so the next
// one passes where it would have been refused.
func TestPrioritizedCalls(t *testing.T) {
	var mu sync.Mutex
	arrivals := map[string][]time.Time{}
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals[r.URL.Path] = append(arrivals[r.URL.Path], time.Now())
		mu.Unlock()
	})
	g := startGateway(t, rulesFor(up.URL, `
routes:
  - { path: /p, upstream: up, resource: p, prioritized: true, occupyTimeoutMs: 1000 }
  - { path: /n, upstream: up, resource: n }
  - { path: /h, upstream: up, resource: h, prioritized: "header:X-Priority=high", occupyTimeoutMs: 1000 }
  - { path: /g/a, upstream: up, resource: ga, prioritized: true, occupyTimeoutMs: 1000 }
apiGroups:
  - { name: g, match: [{ prefix: /g/ }] }
flowRules:
  - { resource: p, count: 5 }
  - { resource: n, count: 5 }
  - { resource: h, count: 1 }
  - { resource: ga, count: 100 }
  - { resource: g, count: 4 }
`))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}, Timeout: 5 * time.Second}
	call := func(ctx context.Context, path string, header ...string) (int, time.Duration) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+path, nil)
		if len(header) == 2 {
			req.Header.Set(header[0], header[1])
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, time.Since(start)
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	// slack: a busy machine's scheduling on top of a wait; the counts at
	// the upstream get none.
	const slack = 700 * time.Millisecond

	// burst sends n calls to path (of resource res) at once: every one
	// must pass, none later than occupyTimeoutMs (1 s) and slack; the
	// upstream gets at most count of them in any second, and the rest
	// waited.
	burst := func(t *testing.T, path, res string, n, count int) {
		t.Helper()
		var wg sync.WaitGroup
		var smu sync.Mutex
		var statuses []int
		var longest time.Duration
		for range n {
			wg.Go(func() {
				st, took := call(context.Background(), path)
				smu.Lock()
				statuses, longest = append(statuses, st), max(longest, took)
				smu.Unlock()
			})
		}
		wg.Wait()
		for _, st := range statuses {
			if st != 200 {
				t.Errorf("%s: statuses %v: every prioritized call should pass", path, statuses)
				break
			}
		}
		if longest > time.Second+slack {
			t.Errorf("%s: the longest call took %v, occupyTimeoutMs is 1000", path, longest)
		}
		mu.Lock()
		got := append([]time.Time(nil), arrivals[path]...)
		mu.Unlock()
		// 20 ms for the trip from the gateway's check to the upstream
		if m := maxArrivalsIn(got, time.Second-20*time.Millisecond); len(got) != n || m > count {
			t.Errorf("%s: the upstream saw %d calls, %d within one second; count is %d", path, len(got), m, count)
		}
		name := `sluice_prioritized_waits_total{resource="` + res + `"}`
		if w := metric(t, g, name); w != strconv.Itoa(n-count) {
			t.Errorf("%s = %q, want %d", name, w, n-count)
		}
	}

	t.Run("burst", func(t *testing.T) { burst(t, "/p", "p", 10, 5) })

	// /g/a has room for 100 a second; its group g for 4: a burst of 8
	// passes 4 at once and 4 when they leave g's window.
	t.Run("an API group's rule waits too", func(t *testing.T) { burst(t, "/g/a", "ga", 8, 4) })

	t.Run("plain calls are refused at once", func(t *testing.T) {
		for i := range 5 {
			if st, _ := call(context.Background(), "/n"); st != 200 {
				t.Fatalf("call %d: %d", i, st)
			}
		}
		if st, took := call(context.Background(), "/n"); st != 429 || took > slack {
			t.Errorf("the 6th plain call: %d after %v, want 429 at once", st, took)
		}
		// on /h only X-Priority: high is prioritized
		if st, _ := call(context.Background(), "/h"); st != 200 {
			t.Fatalf("/h: %d", st)
		}
		if st, took := call(context.Background(), "/h", "X-Priority", "low"); st != 429 || took > slack {
			t.Errorf("/h with X-Priority: low: %d after %v, want 429 at once", st, took)
		}
	})

	t.Run("a waiter that leaves frees its slot", func(t *testing.T) {
		// /h passed one call just now (count 1): the next prioritized one
		// waits for the second after it; a third, arriving meanwhile, would
		// need the second after that, beyond its 1 s: refused, unless the
		// one before it leaves.
		ctx, cancel := context.WithCancel(context.Background())
		left := make(chan int)
		go func() { st, _ := call(ctx, "/h", "X-Priority", "high"); left <- st }()
		poll(t, 5*time.Second, "the first waiter waits", func() bool {
			return metric(t, g, `sluice_prioritized_waits_total{resource="h"}`) == "1" &&
				metric(t, g, `sluice_concurrency{resource="h"}`) == "1"
		})
		cancel()
		if st := <-left; st != 0 {
			t.Fatalf("the waiter that left got %d", st)
		}
		poll(t, 5*time.Second, "the gateway sees the waiter gone", func() bool {
			return metric(t, g, `sluice_concurrency{resource="h"}`) == "0"
		})
		st, took := call(context.Background(), "/h", "X-Priority", "high")
		if st != 200 || took > time.Second+slack {
			t.Fatalf("the next prioritized call: %d after %v, want 200 within 1 s (the freed slot)", st, took)
		}
		mu.Lock()
		got := append([]time.Time(nil), arrivals["/h"]...)
		mu.Unlock()
		if m := maxArrivalsIn(got, time.Second-20*time.Millisecond); len(got) != 2 || m > 1 {
			t.Errorf("the upstream saw %d calls on /h, %d within one second; want 2, 1 (the one that left never reached it)", len(got), m)
		}
	})
}
