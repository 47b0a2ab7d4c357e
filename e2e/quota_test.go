package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
	_ "time/tzdata"
)

// TestDailyQuotaSurvivesRestartAndSpansGateways: a daily quota by API key
// (docs/recipes.md's free/paid plan: 5 calls a day, 8 for the paid key, in
// New York's calendar) on gateways sharing a Redis of the test's own.
// Gateway A passes a free key 5 times (RateLimit r 4..0, w the day's
// length), then blocks it with t and Retry-After the seconds to midnight in
// New York as this test's own clock computes them (within 3 s); A is
// stopped and B started: the key is still blocked, and so it is on a
// second gateway C started beside B; a fresh key's 5 calls are shared
// between B and C; the paid key gets its 8. Every count is taken at the
// upstream.
func TestDailyQuotaSurvivesRestartAndSpansGateways(t *testing.T) {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	// The test's own calendar: the next local midnight, and the day's length.
	midnightAfter := func(at time.Time) (time.Time, time.Duration) {
		l := at.In(loc)
		start := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc)
		next := time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, loc)
		return next, next.Sub(start)
	}
	if next, _ := midnightAfter(time.Now()); time.Until(next) < 2*time.Minute {
		t.Skip("within two minutes of midnight in New York: the quota would reset during the test")
	}
	rd := clStartRedis(t)
	var mu sync.Mutex
	arrived := map[string]int{} // at the upstream, by key
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived[r.Header.Get("X-API-Key")]++
		mu.Unlock()
	})
	upstreamSaw := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		return arrived[key]
	}
	rules := rulesFor(up.URL, fmt.Sprintf(`
routes:
  - path: /v1/orders
    upstream: up
    resource: api
paramRules:
  - resource: api
    param: header:X-API-Key
    count: 5
    window: day
    timezone: America/New_York
    clusterMode: true
    items:
      - { value: paid-key, count: 8 }
cluster:
  redis: %s
  namespace: %s
`, rd.url(), clNamespace(t)))

	// call sends one request for key and checks the RateLimit fields: the
	// policy q and w, r, and on a block t and Retry-After against the
	// seconds to midnight.
	call := func(g *gateway, name, key string, wantStatus int, q, r int64) {
		t.Helper()
		sent := time.Now()
		resp, _ := get(t, g.URL+"/v1/orders", "X-API-Key: "+key)
		next, day := midnightAfter(sent)
		if resp.StatusCode != wantStatus {
			t.Fatalf("%s: key %s: %d, want %d", name, key, resp.StatusCode, wantStatus)
		}
		policies, err := parseSFList(resp.Header.Values("RateLimit-Policy"))
		if err != nil || len(policies) != 1 {
			t.Fatalf("%s: RateLimit-Policy %q: %v, want one item", name, resp.Header.Values("RateLimit-Policy"), err)
		}
		if p := policies[0]; p.param("q") != q || p.param("w") != int64(day/time.Second) {
			t.Errorf("%s: policy q=%v w=%v, want q=%d w=%d (the day's length in New York)", name, p.param("q"), p.param("w"), q, int64(day/time.Second))
		}
		limits, err := parseSFList(resp.Header.Values("RateLimit"))
		if err != nil || len(limits) != 1 {
			t.Fatalf("%s: RateLimit %q: %v, want one item", name, resp.Header.Values("RateLimit"), err)
		}
		if got := limits[0].param("r"); got != r {
			t.Errorf("%s: RateLimit r=%v, want %d", name, got, r)
		}
		tsec, _ := limits[0].param("t").(int64)
		want := int64(next.Sub(sent).Seconds())
		if tsec < want-3 || tsec > want+3 {
			t.Errorf("%s: RateLimit t=%d, want about %d (seconds to midnight in New York)", name, tsec, want)
		}
		if wantStatus == http.StatusTooManyRequests {
			ra, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
			if err != nil || ra < tsec || ra < want-3 || ra > want+3 {
				t.Errorf("%s: Retry-After %q, want about %d and not before t=%d", name, resp.Header.Get("Retry-After"), want, tsec)
			}
		}
	}

	a := startGateway(t, rules)
	a.waitLog("cluster: redis reachable", 5*time.Second)
	for i := range 5 {
		call(a, fmt.Sprintf("gateway A, call %d", i+1), "free-1", 200, 5, int64(4-i))
	}
	call(a, "gateway A, call 6", "free-1", 429, 5, 0)
	if n := upstreamSaw("free-1"); n != 5 {
		t.Fatalf("upstream saw %d calls of free-1, want 5", n)
	}

	a.stop()
	b := startGateway(t, rules)
	b.waitLog("cluster: redis reachable", 5*time.Second)
	call(b, "gateway B (A restarted)", "free-1", 429, 5, 0)
	c := startGateway(t, rules)
	c.waitLog("cluster: redis reachable", 5*time.Second)
	call(c, "gateway C beside B", "free-1", 429, 5, 0)
	if n := upstreamSaw("free-1"); n != 5 {
		t.Errorf("upstream saw %d calls of free-1 after the restart, want still 5", n)
	}
	// The operator's view (GET /api/params) on C, which never passed
	// free-1: what Redis has left of the day, without taking a call.
	for _, want := range []struct {
		key  string
		left float64
	}{{"free-1", 0}, {"free-3", 5}, {"free-3", 5}} {
		resp, body := get(t, c.AdminURL+"/api/params?resource=api&value="+want.key)
		var out struct {
			Rules []struct {
				Values []struct {
					Remaining    float64 `json:"remaining"`
					NextTokenSec float64 `json:"nextTokenSec"`
				} `json:"values"`
			} `json:"rules"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil || resp.StatusCode != 200 || len(out.Rules) != 1 || len(out.Rules[0].Values) != 1 {
			t.Fatalf("GET /api/params %s: %d %s (%v)", want.key, resp.StatusCode, body, err)
		}
		v := out.Rules[0].Values[0]
		next, _ := midnightAfter(time.Now())
		if toMidnight := time.Until(next).Seconds(); v.Remaining != want.left || v.NextTokenSec < toMidnight-3 || v.NextTokenSec > toMidnight+3 {
			t.Errorf("/api/params %s: remaining %g, next token in %.0fs; want %g left, the reset in about %.0fs", want.key, v.Remaining, v.NextTokenSec, want.left, toMidnight)
		}
	}

	// A fresh key over both gateways: 5 in all, then blocked on either.
	for i, g := range []*gateway{b, c, b, c, b} {
		call(g, fmt.Sprintf("free-2, call %d", i+1), "free-2", 200, 5, int64(4-i))
	}
	call(c, "free-2 on C, call 6", "free-2", 429, 5, 0)
	call(b, "free-2 on B, call 7", "free-2", 429, 5, 0)
	for i := range 8 {
		call([]*gateway{b, c}[i%2], fmt.Sprintf("paid-key, call %d", i+1), "paid-key", 200, 8, int64(7-i))
	}
	call(b, "paid-key, call 9", "paid-key", 429, 8, 0)
	for key, want := range map[string]int{"free-1": 5, "free-2": 5, "paid-key": 8} {
		if n := upstreamSaw(key); n != want {
			t.Errorf("upstream saw %d calls of %s, want %d", n, key, want)
		}
	}
}
