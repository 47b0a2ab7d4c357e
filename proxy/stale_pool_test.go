package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStalePoolAfterABurst: a burst of n requests leaves n pooled
// connections, and the upstream closes them all while idle (its keep-alive
// is 300 ms; the pause is 1.2 s, past the fast path's idleProbe). The next
// POST and GET find every pooled connection stale, one after another, and
// go on a new one: 200 on both forwarders, with retries: 0. The fast path
// gave up after two stale connections and answered 502 to a burst of two
// or more, where net/http got 200.
func TestStalePoolAfterABurst(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(50 * time.Millisecond) // the burst's requests overlap: n connections
		_, _ = io.WriteString(w, "ok")
	}))
	up.Config.IdleTimeout = 300 * time.Millisecond
	up.Start()
	t.Cleanup(up.Close) // after the parallel cases
	for _, fwd := range []string{"fast", "standard"} {
		for _, n := range []int{2, 4, 8} {
			t.Run(fmt.Sprintf("%s, a burst of %d", fwd, n), func(t *testing.T) {
				t.Parallel() // each waits out its own pause on its own gateway
				burstThenPause(t, fwd, up.URL, n)
			})
		}
	}
}

// burstThenPause sends n POSTs at once through a gateway to target, waits
// past its keep-alive and idleProbe, and checks a POST and a GET then.
func burstThenPause(t *testing.T, fwd, target string, n int) {
	gw, _ := countedGateway(t, fwd, target, "2s")
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := http.Post("http://"+gw+"/warm", "text/plain", strings.NewReader("w")); err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	time.Sleep(1200 * time.Millisecond)
	for _, method := range []string{"POST", "GET"} {
		req, _ := http.NewRequest(method, "http://"+gw+"/x", strings.NewReader("abc"))
		if method == "GET" {
			req.Body, req.ContentLength = nil, 0
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s, a burst of %d: %s after the pause: %d, want 200", fwd, n, method, resp.StatusCode)
		}
	}
}
