package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Hot-parameter (paramRules) tests against the real binary. Budget: about
// 20 s of load in all.

// seedParamRules is the seed example of docs/rules.md#the-seed-example: 2 per second per order id,
// except 102 -> 4 and 103 -> 10.
const seedParamRules = `
routes:
  - path: /order/{orderId}
    upstream: up
    resource: get-order
paramRules:
  - resource: get-order
    param: path:orderId
    count: 2
    items:
      - { value: "102", count: 4 }
      - { value: "103", count: 10 }
`

// TestParamSeedExample offers 20 req/s to each of four order ids: each id is
// limited on its own, 102 and 103 by their items. Each bucket starts full
// (count tokens), so the steady rate is judged on sends from 1.5 s on, when
// even 103's 10 initial tokens are long spent (20 offered - 10 refilled a
// second drains them within 1 s).
func TestParamSeedExample(t *testing.T) {
	up := startUpstream(t, nil)
	g := startGateway(t, rulesFor(up.URL, seedParamRules))
	ids := []string{"1", "102", "103", "7"}
	counts := []float64{2, 4, 10, 2}
	var targets []target
	for _, id := range ids {
		targets = append(targets, to(g.URL+"/order/"+id))
	}
	const (
		secs   = 4
		from   = 1500 * time.Millisecond
		until  = secs * time.Second
		steady = float64(until-from) / float64(time.Second)
	)
	res := run(t, load{Rate: 20 * float64(len(ids)), Duration: secs * time.Second, Targets: targets})
	res.checkLag(t)
	res.only200And429(t, "seed")
	for i, id := range ids {
		r := res.only(i)
		c := counts[i]
		// The bucket's tokens arrive every 1/count s, so a steady stretch
		// passes count*length, +-1 for where the stretch cuts the spacing;
		// 10% more for scheduling noise on a loaded machine.
		want := c * steady
		got := r.passesSent(from, until)
		if tol := 1 + 0.1*want; float64(got) < want-tol || float64(got) > want+tol {
			t.Errorf("/order/%s: %d passes in the steady %.1f s (%.2f/s), want %.0f ±%.1f (%.0f/s); per second %v",
				id, got, steady, float64(got)/steady, want, tol, c, r.perSecond(200))
		}
		// GCRA: no real 1 s window passes more than the full bucket plus
		// one second of refill; +1 for the spread of arrival delays.
		if m := r.maxInWindow(200, time.Second); float64(m) > 2*c+1 {
			t.Errorf("/order/%s: a real 1 s window passed %d, over 2 x count + 1 = %.0f", id, m, 2*c+1)
		}
		t.Logf("/order/%s (count %.0f): %d of %d passed, steady %.2f/s, per second %v, max in any 1 s %d",
			id, c, r.count(200), len(r.hits), float64(got)/steady, r.perSecond(200), r.maxInWindow(200, time.Second))
	}
	t.Logf("max send lag %v", res.maxLag)

	// /order/1's bucket is spent: the next answers are param blocks.
	var blocked *http.Response
	var body string
	for i := 0; i < 4 && blocked == nil; i++ {
		if resp, b := get(t, g.URL+"/order/1"); resp.StatusCode == 429 {
			blocked, body = resp, b
		}
	}
	if blocked == nil {
		t.Fatal("4 quick requests to /order/1 after the run: none blocked")
	}
	if got := blocked.Header.Get("X-Sluice-Blocked"); got != "param" {
		t.Errorf("X-Sluice-Blocked = %q, want param", got)
	}
	if want := `{"error":"blocked","resource":"get-order","reason":"param"}`; body != want {
		t.Errorf("body = %q, want %q", body, want)
	}
	if p := blocked.Header.Get("RateLimit-Policy"); !paramPolicy(`"get-order";q=2;w=1`).MatchString(p) {
		t.Errorf("RateLimit-Policy on a param block = %q, want \"get-order\";q=2;w=1;pk=:<the value's hash>:", p)
	}
	if ra := blocked.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After = %q, want 1 (a token comes within 0.5 s)", ra)
	}
}

// TestParamHeaderAndQuerySources limits per value of a header and of a query
// parameter; requests that lack the parameter are not limited by the rule.
func TestParamHeaderAndQuerySources(t *testing.T) {
	up := startUpstream(t, nil)
	g := startGateway(t, rulesFor(up.URL, `
routes:
  - path: /h
    upstream: up
    resource: by-header
  - path: /q
    upstream: up
    resource: by-query
paramRules:
  - resource: by-header
    param: header:X-User
    count: 5
  - resource: by-query
    param: query:user
    count: 5
    items:
      - { value: "vip", count: 10 }
`))
	cases := []struct {
		name  string
		tgt   target
		count float64 // 0: not limited
	}{
		{"header alice", to(g.URL+"/h", "X-User: alice"), 5},
		{"header bob", to(g.URL+"/h", "X-User: bob"), 5},
		{"no header", to(g.URL + "/h"), 0},
		{"query alice", to(g.URL + "/q?user=alice&x=1"), 5},
		{"query vip (item)", to(g.URL + "/q?x=1&user=vip"), 10},
		{"no query param", to(g.URL + "/q?x=1"), 0},
	}
	var targets []target
	for _, c := range cases {
		targets = append(targets, c.tgt)
	}
	const (
		secs   = 3
		from   = 1500 * time.Millisecond
		until  = secs * time.Second
		steady = float64(until-from) / float64(time.Second)
	)
	res := run(t, load{Rate: 20 * float64(len(cases)), Duration: secs * time.Second, Targets: targets})
	res.checkLag(t)
	res.only200And429(t, "sources")
	for i, c := range cases {
		r := res.only(i)
		if c.count == 0 {
			if r.count(200) != len(r.hits) {
				t.Errorf("%s: %v, want every request passed (the rule does not apply)", c.name, r.statuses())
			}
			t.Logf("%s: %d of %d passed", c.name, r.count(200), len(r.hits))
			continue
		}
		want := c.count * steady
		got := r.passesSent(from, until)
		if tol := 1 + 0.1*want; float64(got) < want-tol || float64(got) > want+tol {
			t.Errorf("%s: %d passes in the steady %.1f s, want %.0f ±%.1f; per second %v",
				c.name, got, steady, want, tol, r.perSecond(200))
		}
		t.Logf("%s (count %.0f): %d of %d passed, steady %.2f/s, per second %v",
			c.name, c.count, r.count(200), len(r.hits), float64(got)/steady, r.perSecond(200))
	}
}

// TestParamThrottle queues each value's requests at 200/s: 400/s offered to
// one value pass at 200/s, spaced, the rest rejected once the queue would
// wait longer than maxQueueingTimeMs; 100/s offered to another value all pass.
func TestParamThrottle(t *testing.T) {
	up := startUpstream(t, nil)
	g := startGateway(t, rulesFor(up.URL, `
routes:
  - path: /t/{id}
    upstream: up
    resource: throttled
paramRules:
  - resource: throttled
    param: path:id
    count: 200
    controlBehavior: throttle
    maxQueueingTimeMs: 200
`))
	// Request i goes to targets[i%5]: four of five to /t/hot (400/s), one to /t/calm (100/s).
	hot, calm := to(g.URL+"/t/hot"), to(g.URL+"/t/calm")
	const secs = 3
	res := run(t, load{Rate: 500, Duration: secs * time.Second, Targets: []target{hot, hot, hot, hot, calm}})
	res.checkLag(t)
	res.only200And429(t, "throttle")
	var hr result
	for i := 0; i < 4; i++ {
		hr.hits = append(hr.hits, res.only(i).hits...)
	}
	cr := res.only(4)
	if cr.count(200) != len(cr.hits) {
		t.Errorf("/t/calm at 100/s: %v, want every request passed", cr.statuses())
	}
	// The queue starts empty, so the first 200 ms of queue also pass: 200/s
	// for the run plus up to 40 queued; the last sends are judged by
	// completion, which the queue delays by up to 200 ms.
	rate := float64(hr.count(200)) / secs
	if rate < 0.9*200 || rate > 1.1*200+40/secs {
		t.Errorf("/t/hot at 400/s: passed %.1f/s, want 200 -10%%/+10%%+queue; per second %v", rate, hr.perSecond(200))
	}
	if m := hr.maxDoneIn(200, time.Second); m > 220 {
		t.Errorf("/t/hot: %d answers completed within one real second, want <= 200 +10%%", m)
	}
	// Throttle spaces passes: 100 ms hold about 20 (60 leaves room for a
	// stalled machine), never the 200 at once a token bucket would allow.
	if m := hr.maxDoneIn(200, 100*time.Millisecond); m > 60 {
		t.Errorf("/t/hot: %d answers completed within 100 ms, want about 20 (spaced 5 ms)", m)
	}
	var slowest time.Duration
	for _, h := range hr.hits {
		if h.status == 200 {
			slowest = max(slowest, h.done-h.sent)
		}
	}
	t.Logf("/t/hot: %d of %d passed (%.1f/s), max completed in 1 s %d, in 100 ms %d, slowest pass %v; /t/calm %d of %d; max send lag %v",
		hr.count(200), len(hr.hits), rate, hr.maxDoneIn(200, time.Second), hr.maxDoneIn(200, 100*time.Millisecond),
		slowest, cr.count(200), len(cr.hits), res.maxLag)
}

// paramInFlight tracks an upstream's in-flight requests per path.
type paramInFlight struct {
	mu      sync.Mutex
	now     map[string]int
	maxSeen map[string]int
}

func (p *paramInFlight) enter(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now[path]++
	p.maxSeen[path] = max(p.maxSeen[path], p.now[path])
}

func (p *paramInFlight) exit(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now[path]--
}

// TestParamConcurrency caps calls in flight per value against a slow
// upstream: each value sees at most count at once, and every slot is given
// back (sequential calls after the run all pass).
func TestParamConcurrency(t *testing.T) {
	const slow = 200 * time.Millisecond
	fl := &paramInFlight{now: map[string]int{}, maxSeen: map[string]int{}}
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		fl.enter(r.URL.Path)
		defer fl.exit(r.URL.Path)
		time.Sleep(slow)
		fmt.Fprint(w, "ok")
	})
	g := startGateway(t, rulesFor(up.URL, `
routes:
  - path: /c/{id}
    upstream: up
    resource: conc
paramRules:
  - resource: conc
    param: path:id
    grade: concurrency
    count: 2
    items:
      - { value: "big", count: 4 }
`))
	// 25/s for 200 ms each is 5 at once offered per value.
	paths := []string{"/c/a", "/c/b", "/c/big"}
	limits := []int{2, 2, 4}
	var targets []target
	for _, p := range paths {
		targets = append(targets, to(g.URL+p))
	}
	res := run(t, load{Rate: 25 * float64(len(paths)), Duration: 3 * time.Second, Targets: targets})
	res.checkLag(t)
	res.only200And429(t, "concurrency")
	for i, p := range paths {
		r := res.only(i)
		fl.mu.Lock()
		seen := fl.maxSeen[p]
		fl.mu.Unlock()
		if seen > limits[i] {
			t.Errorf("%s: upstream saw %d in flight at once, want <= %d", p, seen, limits[i])
		}
		if seen < limits[i] {
			t.Errorf("%s: upstream saw at most %d in flight, want the limit %d reached (5 offered at once)", p, seen, limits[i])
		}
		// limit/slow calls a second at most; at least half of that passes
		// even when the machine stretches the upstream's 200 ms.
		perSec := float64(r.count(200)) / 3
		if best := float64(limits[i]) / slow.Seconds(); perSec > best*1.1 || perSec < best/2 || r.count(429) == 0 {
			t.Errorf("%s: passed %.1f/s with %d blocked, want about %.0f/s and some blocked", p, perSec, r.count(429), best)
		}
		t.Logf("%s (limit %d): %d of %d passed (%.1f/s), %d blocked, upstream max in flight %d",
			p, limits[i], r.count(200), len(r.hits), perSec, r.count(429), seen)
	}
	// Every slot was released: one call at a time always passes.
	for i := 0; i < 3; i++ {
		if resp, _ := get(t, g.URL+"/c/a"); resp.StatusCode != 200 {
			t.Fatalf("sequential call %d after the run: %d, want 200 (a leaked in-flight slot?)", i, resp.StatusCode)
		}
	}
}

// TestParamStateSurvivesReload spends a value's bucket, reloads a file whose
// param rule is unchanged (but moved down by an added route), and checks the
// value is still spent; a reload that raises the rule's count keeps the
// tokens spent (it started afresh: 4 more passed, now 1).
func TestParamStateSurvivesReload(t *testing.T) {
	up := startUpstream(t, nil)
	rules := func(extraRoute bool, count int) string {
		extra := ""
		if extraRoute {
			extra = "  - path: /other\n    upstream: up\n"
		}
		// durationSec 60: the bucket refills one token per 20 s, so nothing
		// comes back during the test.
		return rulesFor(up.URL, fmt.Sprintf(`
routes:
%s  - path: /order/{orderId}
    upstream: up
    resource: get-order
paramRules:
  - resource: get-order
    param: path:orderId
    count: %d
    durationSec: 60
`, extra, count))
	}
	g := startGateway(t, rules(false, 3))
	passes := func(id string, n int) int {
		ok := 0
		for i := 0; i < n; i++ {
			if resp, _ := get(t, g.URL+"/order/"+id); resp.StatusCode == 200 {
				ok++
			}
		}
		return ok
	}
	reload := func(what, file string, reloads int) {
		t.Helper()
		g.writeRules(file)
		poll(t, 2*time.Second, what+": a reload", func() string {
			if len(g.logs.Events("rules loaded")) < reloads {
				return g.logs.String()
			}
			return ""
		})
	}
	if n := passes("5", 5); n != 3 {
		t.Fatalf("count 3 per 60 s: %d of 5 passed", n)
	}
	reload("unrelated change", rules(true, 3), 2)
	if resp, _ := get(t, g.URL+"/other"); resp.StatusCode != 200 {
		t.Fatalf("the added route answers %d: the new file is not in force", resp.StatusCode)
	}
	if n := passes("5", 2); n != 0 {
		t.Errorf("after a reload that left the rule alone: %d of 2 passed for a spent value, want 0", n)
	}
	if n := passes("6", 4); n != 3 {
		t.Errorf("after the reload a new value: %d of 4 passed, want 3", n)
	}
	reload("changed count", rules(true, 4), 3)
	if n := passes("5", 5); n != 1 {
		t.Errorf("after changing count to 4: %d of 5 passed, want 1 (the 3 tokens spent stay spent)", n)
	}
}

// TestParamRateLimitHeadersOnPass: docs/configuration.md#blocked-and-failed-requests
// promises RateLimit headers for qps
// rules on passes as well as blocks: a param qps rule's quota must reach
// passed responses too.
func TestParamRateLimitHeadersOnPass(t *testing.T) {
	up := startUpstream(t, nil)
	g := startGateway(t, rulesFor(up.URL, strings.Replace(seedParamRules, "count: 2\n", "count: 2\n    durationSec: 10\n", 1)))
	for i, wantR := range []int{1, 0} {
		resp, _ := get(t, g.URL+"/order/9")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d, want 200", i, resp.StatusCode)
		}
		if p := resp.Header.Get("RateLimit-Policy"); !paramPolicy(`"get-order";q=2;w=10`).MatchString(p) {
			t.Errorf("request %d: RateLimit-Policy on a pass = %q, want \"get-order\";q=2;w=10;pk=:<the value's hash>:", i, p)
		}
		rl := resp.Header.Get("RateLimit")
		if !paramPolicy(fmt.Sprintf(`"get-order";r=%d;t=\d+`, wantR)).MatchString(rl) {
			t.Errorf("request %d: RateLimit = %q, want r=%d, t and the value's pk", i, rl, wantR)
		}
	}
}

// TestParamSemanticsWithoutLoad checks, one request at a time, what needs no
// rate: the ip and cookie sources (a spoofed X-Forwarded-For from an untrusted
// peer buys no new bucket), acquireCount taking several tokens of a value,
// and a value evicted by maxTrackedValues coming back with a full bucket.
func TestParamSemanticsWithoutLoad(t *testing.T) {
	up := startUpstream(t, nil)
	// durationSec 3600: no token comes back during the test.
	g := startGateway(t, rulesFor(up.URL, `
routes:
  - path: /ip
    upstream: up
    resource: by-ip
  - path: /cookie
    upstream: up
    resource: by-cookie
  - path: /heavy/{id}
    upstream: up
    resource: heavy
    acquireCount: 2
  - path: /small/{id}
    upstream: up
    resource: small
paramRules:
  - resource: by-ip
    param: ip
    count: 2
    durationSec: 3600
  - resource: by-cookie
    param: cookie:session
    count: 1
    durationSec: 3600
  - resource: heavy
    param: path:id
    count: 5
    durationSec: 3600
  - resource: small
    param: path:id
    count: 1
    durationSec: 3600
    maxTrackedValues: 2
`))
	type step struct {
		path    string
		headers []string
		want    int
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"ip ignores a spoofed X-Forwarded-For", []step{
			{"/ip", []string{"X-Forwarded-For: 10.0.0.1"}, 200},
			{"/ip", []string{"X-Forwarded-For: 10.0.0.2"}, 200},
			{"/ip", []string{"X-Forwarded-For: 10.0.0.3"}, 429},
		}},
		{"cookie per value, absent cookie not limited", []step{
			{"/cookie", []string{"Cookie: theme=dark; session=s1"}, 200},
			{"/cookie", []string{"Cookie: session=s1"}, 429},
			{"/cookie", []string{"Cookie: session=s2; theme=dark"}, 200},
			{"/cookie", []string{"Cookie: theme=dark"}, 200},
			{"/cookie", nil, 200},
		}},
		{"acquireCount 2 takes 2 of a value's 5 tokens", []step{
			{"/heavy/x", nil, 200},
			{"/heavy/x", nil, 200},
			{"/heavy/x", nil, 429},
			{"/heavy/y", nil, 200},
		}},
		{"an evicted value comes back with a full bucket", []step{
			{"/small/a", nil, 200},
			{"/small/a", nil, 429}, // a's one token is spent
			{"/small/b", nil, 200},
			{"/small/c", nil, 200}, // cap 2: a, the least recently used, is evicted
			{"/small/a", nil, 200}, // a starts afresh
			{"/small/a", nil, 429},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i, s := range c.steps {
				resp, body := get(t, g.URL+s.path, s.headers...)
				if resp.StatusCode != s.want {
					t.Fatalf("step %d %s %v: %d %q, want %d", i, s.path, s.headers, resp.StatusCode, body, s.want)
				}
				if s.want == 429 && resp.Header.Get("X-Sluice-Blocked") != "param" {
					t.Errorf("step %d: X-Sluice-Blocked = %q, want param", i, resp.Header.Get("X-Sluice-Blocked"))
				}
			}
		})
	}
}

// paramPolicy matches a param rule's RateLimit item: prefix (a regexp),
// then the partition key of its value, a hash as a byte sequence.
func paramPolicy(prefix string) *regexp.Regexp {
	return regexp.MustCompile(`^` + prefix + `;pk=:[A-Za-z0-9+/]{16}:$`)
}
