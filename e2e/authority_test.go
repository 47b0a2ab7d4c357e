package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestAuthorityRules runs authority rules on the real binary, one route
// each: a white list by origin, a white list by address that holds the
// test client (127.0.0.1) and one that does not, and a black list by
// origin. A refused call is 403 (whatever blockResponse.status), carries
// X-Sluice-Blocked: authority, never reaches the upstream, and is counted
// in sluice_blocked_total{reason="authority"} and in blockQps.
func TestAuthorityRules(t *testing.T) {
	var mu sync.Mutex
	reached := map[string]int{} // path -> calls the upstream got
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached[r.URL.Path]++
		mu.Unlock()
	})
	g := startGateway(t, fmt.Sprintf(`
origin:
  from: header:X-Origin
upstreams:
  up:
    targets: [%q]
routes:
  - { path: /white-origin, upstream: up, resource: white-origin }
  - { path: /white-ip-in, upstream: up, resource: white-ip-in }
  - { path: /white-ip-out, upstream: up, resource: white-ip-out }
  - { path: /black-origin, upstream: up, resource: black-origin }
authorityRules:
  - { resource: white-origin, strategy: white, limitApp: "app-a, app-b" }
  - { resource: white-ip-in, strategy: white, ips: ["10.0.0.0/8", "127.0.0.0/8"] }
  - { resource: white-ip-out, strategy: white, ips: ["10.0.0.0/8", "::1", "192.168.0.1"] }
  - { resource: black-origin, strategy: black, limitApp: app-x }
blockResponse:
  status: 503
`, up.URL))

	calls := []struct {
		path    string
		headers []string
		pass    bool
	}{
		{"/white-origin", []string{"X-Origin: app-a"}, true},
		{"/white-origin", []string{"X-Origin: app-b"}, true},
		{"/white-origin", []string{"X-Origin: app-c"}, false},
		{"/white-origin", nil, false}, // no origin is not on the list
		{"/white-ip-in", nil, true},
		{"/white-ip-in", []string{"X-Origin: anyone"}, true},
		{"/white-ip-out", nil, false},
		{"/white-ip-out", []string{"X-Forwarded-For: 10.0.0.1"}, false}, // not a trusted proxy: the header is not read
		{"/black-origin", []string{"X-Origin: app-x"}, false},
		{"/black-origin", []string{"X-Origin: app-y"}, true},
		{"/black-origin", nil, true},
	}
	wantReached := map[string]int{}
	for _, c := range calls {
		resp, body := get(t, g.URL+c.path, c.headers...)
		blocked := resp.Header.Get("X-Sluice-Blocked")
		if c.pass {
			wantReached[c.path]++
			if resp.StatusCode != 200 || blocked != "" {
				t.Errorf("%s %q: %d %q, want 200", c.path, c.headers, resp.StatusCode, blocked)
			}
			continue
		}
		if resp.StatusCode != 403 || blocked != "authority" || resp.Header.Get("Retry-After") != "" {
			t.Errorf("%s %q: %d X-Sluice-Blocked %q Retry-After %q, want 403 authority and no Retry-After",
				c.path, c.headers, resp.StatusCode, blocked, resp.Header.Get("Retry-After"))
		}
		if want := fmt.Sprintf(`{"error":"blocked","resource":%q,"reason":"authority"}`, c.path[1:]); body != want {
			t.Errorf("%s: body %s, want %s", c.path, body, want)
		}
	}
	mu.Lock()
	for _, path := range []string{"/white-origin", "/white-ip-in", "/white-ip-out", "/black-origin"} {
		if reached[path] != wantReached[path] {
			t.Errorf("the upstream got %d calls of %s, want %d (the passed ones)", reached[path], path, wantReached[path])
		}
	}
	mu.Unlock()

	m := metrics(t, g)
	for res, want := range map[string]float64{"white-origin": 2, "white-ip-in": 0, "white-ip-out": 2, "black-origin": 1} {
		if got := m[fmt.Sprintf(`sluice_blocked_total{reason="authority",resource=%q}`, res)]; got != want {
			t.Errorf(`sluice_blocked_total{reason="authority",resource=%q} = %v, want %v`, res, got, want)
		}
		if got := m[fmt.Sprintf(`sluice_requests_total{resource=%q,result="block"}`, res)]; got != want {
			t.Errorf(`sluice_requests_total{resource=%q,result="block"} = %v, want %v`, res, got, want)
		}
	}

	// blockQps is over the last second: a refused call, then a look.
	poll(t, 5*time.Second, "blockQps of white-ip-out in /api/resources", func() string {
		get(t, g.URL+"/white-ip-out")
		var res admResources
		if err := admTryJSON(g.AdminURL+"/api/resources", &res); err != nil {
			return err.Error()
		}
		if r, ok := res.get("white-ip-out"); !ok || r.BlockQps < 1 || r.PassQps != 0 {
			return fmt.Sprintf("%+v", r)
		}
		return ""
	})
	mu.Lock()
	defer mu.Unlock()
	if reached["/white-ip-out"] != 0 {
		t.Errorf("the upstream got %d calls of /white-ip-out, want 0", reached["/white-ip-out"])
	}
}
