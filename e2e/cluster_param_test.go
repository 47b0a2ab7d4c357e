package e2e

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/internal/redistest"
	"sluice/internal/skipped"
)

// TestClusterParamAcrossTwoGateways: one API key spread over two gateways
// sharing a namespace on a Redis of the test's own. A clusterMode param
// rule (count 40 per second per X-Key, global) passes 40/s of key k1 in
// total, counted at the upstream, while each gateway is offered 60/s of it.
// Redis is killed at 3 s: from 1 s after, each gateway limits the key
// locally at its share, count / 2 gateways = 20/s (40/s in all, not 80),
// and no request gets a 5xx. Redis restarted at 6.5 s: from 1.5 s after,
// the key is counted across the fleet again, 40/s in all. A second key, k2,
// is offered unevenly (50/s to gateway 0, 5/s to gateway 1) and tells the
// cluster from the local shares apart: gateway 0 passes 35/s of it while
// the fleet counts it, 20/s while Redis is down.
func TestClusterParamAcrossTwoGateways(t *testing.T) {
	rd := clStartRedis(t)
	launched := time.Now()
	var mu sync.Mutex
	type arrival struct {
		key, gw string
		at      time.Duration // since launch
	}
	var arrivals []arrival // at the upstream
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, arrival{r.Header.Get("X-Key"), r.Header.Get("X-Gw"), time.Since(launched)})
		mu.Unlock()
	})
	gs := clStartGateways(t, 2, rulesFor(up.URL, fmt.Sprintf(`
routes:
  - path: /c
    upstream: up
    resource: c
paramRules:
  - resource: c
    param: header:X-Key
    count: 40
    clusterMode: true
    clusterConfig: { thresholdType: global, fallbackToLocalWhenFail: true }
cluster:
  redis: %s
  namespace: %s
`, rd.url(), clNamespace(t))))
	const (
		killAt    = 3 * time.Second
		restartAt = 6500 * time.Millisecond
		end       = 10500 * time.Millisecond
	)
	var restartErr error
	var whileUp clUpEvents // a busy machine's Redis timeouts
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	finish := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer finish()
	mu.Lock()
	launched = time.Now()
	mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-stop:
			return
		case <-time.After(killAt - time.Since(launched)):
		}
		whileUp.killing(gs)
		rd.kill()
		select {
		case <-stop:
			return
		case <-time.After(restartAt - time.Since(launched)):
		}
		whileUp.restarting(gs)
		restartErr = rd.startErr()
	}()
	// targets in turn: gateway 0 k1 x6, k2 x5 at 110/s (60/s and 50/s);
	// gateway 1 k1 x12, k2 x1 at 65/s (60/s and 5/s)
	targets := func(g *gateway, gw string, k1, k2 int) []target {
		var ts []target
		for range k1 {
			ts = append(ts, to(g.URL+"/c", "X-Key: k1", "X-Gw: "+gw))
		}
		for range k2 {
			ts = append(ts, to(g.URL+"/c", "X-Key: k2", "X-Gw: "+gw))
		}
		return ts
	}
	loads := []load{
		{Rate: 110, Duration: end, MaxLag: clMaxLag, Targets: targets(gs[0], "0", 6, 5)},
		{Rate: 65, Duration: end, MaxLag: clMaxLag, Targets: targets(gs[1], "1", 12, 1)},
	}
	rs := clRunAll(t, loads)
	finish()
	if restartErr != nil {
		t.Fatal(restartErr)
	}
	clOnly200And429(t, "one key over two gateways, Redis killed and restarted", rs...)
	whileUp.check(t, gs)

	mu.Lock()
	at := append([]arrival(nil), arrivals...)
	mu.Unlock()
	// upstreamIn counts key's arrivals from gateway gw ("": either) in [from, to).
	upstreamIn := func(key, gw string, from, to time.Duration) int {
		n := 0
		for _, a := range at {
			if a.key == key && (gw == "" || a.gw == gw) && a.at >= from && a.at < to {
				n++
			}
		}
		return n
	}
	perSec := func(key, gw string) []int {
		out := make([]int, int(end/time.Second))
		for i := range out {
			out[i] = upstreamIn(key, gw, time.Duration(i)*time.Second, time.Duration(i+1)*time.Second)
		}
		return out
	}
	t.Logf("Redis down [%v, %v); at the upstream per second: k1 %v (from gateway 0 %v, gateway 1 %v); k2 from gateway 0 %v, gateway 1 %v",
		killAt, restartAt, perSec("k1", ""), perSec("k1", "0"), perSec("k1", "1"), perSec("k2", "0"), perSec("k2", "1"))

	outage := [2]time.Duration{killAt + time.Second, restartAt}
	// The fleet counts again from 1.5 s after the restart, or from half a
	// second after the later gateway found Redis back if that came later:
	// the breaker's probe backs off, and a busy machine's probe took
	// longer (k2 from gateway 0 at its local share until 9 s, where the
	// window began at 8 s: 58 passes for 70 ±15%). Back past 8.5 s leaves
	// no second to count: the machine's, as clRedisKeptUp judges.
	from := restartAt + 1500*time.Millisecond
	for i, g := range gs {
		evs := g.logs.Events("cluster: redis reachable again")
		if len(evs) == 0 {
			t.Fatalf("gateway %d never found Redis back after the restart", i)
		}
		ts, _ := evs[len(evs)-1]["time"].(string)
		back, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatalf("gateway %d: the time of its return %q: %v", i, ts, err)
		}
		mu.Lock()
		d := back.Sub(launched) + 500*time.Millisecond
		mu.Unlock()
		from = max(from, d)
	}
	if from > end-2*time.Second {
		msg := fmt.Sprintf("the gateways found Redis back %v after the restart: the machine is too busy to measure", from-500*time.Millisecond-restartAt)
		if !measuringRates() {
			skipped.Skip(t, idleNeed, msg)
		}
		t.Fatal(msg)
	}
	after := [2]time.Duration{from, end - 500*time.Millisecond}
	before := [2]time.Duration{time.Second, killAt}
	for _, c := range []struct {
		what string
		got  int
		span [2]time.Duration
		rate float64
	}{
		{"k1, cluster before the kill", upstreamIn("k1", "", before[0], before[1]), before, 40},
		{"k1, local shares during the outage", upstreamIn("k1", "", outage[0], outage[1]), outage, 40},
		{"k1 from gateway 0 during the outage: count / 2", upstreamIn("k1", "0", outage[0], outage[1]), outage, 20},
		{"k1 from gateway 1 during the outage: count / 2", upstreamIn("k1", "1", outage[0], outage[1]), outage, 20},
		{"k1, cluster again after the restart", upstreamIn("k1", "", after[0], after[1]), after, 40},
		{"k2 from gateway 0, cluster before the kill", upstreamIn("k2", "0", before[0], before[1]), before, 35},
		{"k2 from gateway 0 during the outage: count / 2", upstreamIn("k2", "0", outage[0], outage[1]), outage, 20},
		{"k2 from gateway 0, cluster again after the restart", upstreamIn("k2", "0", after[0], after[1]), after, 35},
	} {
		want := c.rate * (c.span[1] - c.span[0]).Seconds()
		if !clWithin(c.got, want, 0.15) {
			t.Errorf("%s [%v, %v): %d passes, want %.0f (%.0f/s) ±15%%", c.what, c.span[0], c.span[1], c.got, want, c.rate)
		}
	}
}

// TestClusterBlockSaysRetryAfter: a 429 that the cluster decided carries
// Retry-After, whichever gateway answers it: a flow rule of 3 a minute
// (the slot in the way leaves about a minute after it passed) and a param
// rule of one call a minute per key; a remembered block counts down too.
// Its RateLimit field names the cluster rule that blocked, with nothing
// left and t as Retry-After, not the local rule of 1000 a minute that the
// call passed first (which said r=996). The passes before it count the
// fleet's window down (r=2, 1, 0), where they named the local rule
// (r=999) or, for the param rule, nothing.
func TestClusterBlockSaysRetryAfter(t *testing.T) {
	up := startUpstream(t, nil)
	gs := clStartGateways(t, 2, rulesFor(up.URL, fmt.Sprintf(`
routes:
  - { path: /c, upstream: up, resource: c }
  - { path: /k, upstream: up, resource: k }
flowRules:
  - { resource: c, count: 1000, statIntervalMs: 60000 }
  - { resource: c, count: 3, statIntervalMs: 60000, clusterMode: true }
paramRules:
  - { resource: k, param: "header:X-Key", count: 1, durationSec: 60, clusterMode: true }
cluster:
  redis: %s
  namespace: %s
  timeout: 250ms # exact counts: a busy machine's late answer would go to the fallback (cluster.timeout)
`, clRedisURL(t), clNamespace(t))))
	policy := map[string]string{"/c": `"c#flow2"`, "/k": `"k"`}
	retryAfter := func(gw int, path string, header ...string) int {
		t.Helper()
		resp, _ := get(t, gs[gw].URL+path, header...)
		if resp.StatusCode != 429 {
			clLateAnswersSkip(t, gs)
			t.Fatalf("gateway %d %s: %d, want 429", gw, path, resp.StatusCode)
		}
		ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil {
			t.Fatalf("gateway %d %s: Retry-After %q, want whole seconds", gw, path, resp.Header.Get("Retry-After"))
		}
		want := fmt.Sprintf("%s;r=0;t=%d", policy[path], ra)
		if got := resp.Header.Get("RateLimit"); !strings.HasPrefix(got, want) {
			clLateAnswersSkip(t, gs)
			t.Errorf("gateway %d %s: RateLimit %q, want %s (the cluster rule that blocked)", gw, path, got, want)
		}
		return ra
	}
	// The passes count the fleet's window down, the nearest to blocking.
	passLeft := func(what string, resp *http.Response, want string) {
		t.Helper()
		got := resp.Header.Get("RateLimit")
		if resp.StatusCode != 200 || !strings.HasPrefix(got, want+";t=60") && !strings.HasPrefix(got, want+";t=59") {
			clLateAnswersSkip(t, gs) // a call the fallback decided: the machine's count
		}
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", what, resp.StatusCode)
		}
		if !strings.HasPrefix(got, want+";t=60") && !strings.HasPrefix(got, want+";t=59") {
			t.Errorf("%s: RateLimit %q, want %s;t=60 (or 59)", what, got, want)
		}
	}
	for i := range 3 {
		resp, _ := get(t, gs[i%2].URL+"/c")
		passLeft(fmt.Sprintf("call %d of 3 on gateway %d", i, i%2), resp, fmt.Sprintf(`"c#flow2";r=%d`, 2-i))
	}
	resp, _ := get(t, gs[0].URL+"/k", "X-Key: k1")
	passLeft("k1's first call", resp, `"k";r=0`)
	for gw := range gs {
		for range 2 { // Redis's answer, then the remembered block
			if ra := retryAfter(gw, "/c"); ra < 50 || ra > 60 {
				t.Errorf("gateway %d, flow: Retry-After %d, want about 60 (the first pass leaves the minute)", gw, ra)
			}
			if ra := retryAfter(gw, "/k", "X-Key: k1"); ra < 50 || ra > 60 {
				t.Errorf("gateway %d, param: Retry-After %d, want about 60", gw, ra)
			}
		}
	}
}

// TestClusterRuleAddedByReloadIsShared: gateways started with a cluster
// Redis but no clusterMode rule connect to it all the same, so the first
// clusterMode rule a reload brings is counted in Redis at once: 3 a minute
// for the fleet, not 3 per gateway, and no "checked locally" warning.
func TestClusterRuleAddedByReloadIsShared(t *testing.T) {
	up := startUpstream(t, nil)
	rules := func(cluster bool) string {
		return rulesFor(up.URL, fmt.Sprintf(`
routes:
  - { path: /c, upstream: up, resource: c }
flowRules:
  - { resource: c, count: 3, statIntervalMs: 60000, clusterMode: %v }
cluster:
  redis: %s
  namespace: %s
  timeout: 250ms # exact counts: a busy machine's late answer would go to the fallback (cluster.timeout)
`, cluster, clRedisURL(t), clNamespace(t)))
	}
	before := rules(false)
	gs := clStartGateways(t, 2, before)
	after := rules(true)
	for _, g := range gs {
		g.writeRules(after)
		hdWaitEvents(t, g, "rules loaded", 1)
	}
	var statuses []int
	for i := range 6 {
		resp, _ := get(t, gs[i%2].URL+"/c")
		statuses = append(statuses, resp.StatusCode)
	}
	if want := []int{200, 200, 200, 429, 429, 429}; !slices.Equal(statuses, want) {
		clLateAnswersSkip(t, gs) // a call the fallback decided: the machine's count
		t.Errorf("statuses across the two gateways %v, want %v (3 a minute for the fleet)", statuses, want)
	}
	for i, g := range gs {
		if ev := g.logs.Events("clusterMode rule checked locally"); len(ev) != 0 {
			t.Errorf("gateway %d warned that the rule is checked locally:\n%s", i, g.logs)
		}
	}
}

// TestClusterTimeoutIsHowLongRedisIsWaitedFor: a call of a cluster rule
// waits cluster.timeout for Redis: while Redis is paused for 150 ms, a
// gateway on the default 20ms hands the call to the fallback (counted as
// a timeout), and one on 600ms waits and has Redis's decision.
func TestClusterTimeoutIsHowLongRedisIsWaitedFor(t *testing.T) {
	t.Parallel()
	rd := clStartRedis(t)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	ns := clNamespace(t)
	startWith := func(timeout string) *gateway {
		return clStartGateways(t, 1, rulesFor(up.URL, fmt.Sprintf(`
routes:
  - { path: /c, upstream: up, resource: c }
flowRules:
  - { resource: c, count: 1000, clusterMode: true }
cluster:
  redis: %s
  namespace: %s
%s`, rd.url(), ns, timeout)))[0]
	}
	short, long := startWith(""), startWith("  timeout: 600ms\n")
	timeouts := func(g *gateway) float64 {
		return metrics(t, g)[`sluice_cluster_unanswered_total{cause="timeout"}`]
	}
	for _, g := range []*gateway{short, long} {
		if resp, _ := get(t, g.URL+"/c"); resp.StatusCode != 200 {
			t.Fatalf("before the pause: %d", resp.StatusCode)
		}
	}
	for _, c := range []struct {
		name string
		g    *gateway
		late bool
	}{{"the default 20ms", short, true}, {"timeout: 600ms", long, false}} {
		before := timeouts(c.g)
		if _, err := redistest.DoAuth(rd.addr(), "", "CLIENT", "PAUSE", "150", "ALL"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		resp, _ := get(t, c.g.URL+"/c")
		took := time.Since(start)
		time.Sleep(200 * time.Millisecond) // the pause is over
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d during the pause, want 200 (count 1000)", c.name, resp.StatusCode)
		}
		if got := timeouts(c.g) - before; (got > 0) != c.late {
			t.Errorf("%s: %v calls timed out during a 150 ms pause (the call took %v), want late=%v", c.name, got, took, c.late)
		}
		if !c.late && took < 100*time.Millisecond {
			t.Errorf("%s: the call took %v during a 150 ms pause: it did not wait for Redis", c.name, took)
		}
	}
}
