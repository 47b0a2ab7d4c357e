package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// cbPhase is one stretch of load against the breaker-guarded route, with what
// the upstream served meanwhile.
type cbPhase struct {
	name     string
	res      *result
	upstream int64 // requests the upstream received during the run
}

// forwarded are the hits the gateway did not block (anything but 429).
func (p cbPhase) forwarded() []hit {
	var out []hit
	for _, h := range p.res.hits {
		if h.status != http.StatusTooManyRequests {
			out = append(out, h)
		}
	}
	return out
}

// firstBlock is the index (in send order) of the first 429, or -1.
func (p cbPhase) firstBlock() int {
	for i, h := range p.res.hits {
		if h.status == http.StatusTooManyRequests {
			return i
		}
	}
	return -1
}

// TestDegradeTripsIsolatesAndRecovers drives one route guarded by an
// errorRatio and a slowRatio breaker through the life of a bad upstream:
// healthy, failing with 500s (the errorRatio breaker trips), recovered (the
// probe closes it), slow (the slowRatio breaker trips), recovered again.
// While a breaker is open the upstream must see nothing but the probes, one
// per retryTimeoutMs; once the upstream is healthy the breaker closes and
// every request flows.
func TestDegradeTripsIsolatesAndRecovers(t *testing.T) {
	const (
		rate    = 100.0
		window  = time.Second            // statIntervalMs
		retry   = 500 * time.Millisecond // retryTimeoutMs
		maxRt   = 200 * time.Millisecond // maxAllowedRtMs
		slowFor = 400 * time.Millisecond // how slow the slow upstream is
	)
	var mode atomic.Int32 // 0 healthy, 1 500s, 2 slow
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case 1:
			http.Error(w, "broken", http.StatusInternalServerError)
		case 2:
			time.Sleep(slowFor)
			fmt.Fprint(w, "slow")
		default:
			fmt.Fprint(w, "ok")
		}
	})
	g := startGateway(t, rulesFor(up.URL, fmt.Sprintf(`
routes:
  - path: /cb
    upstream: up
    resource: cb
degradeRules:
  - resource: cb
    strategy: errorRatio
    threshold: 0.5
    statIntervalMs: %d
    minRequestAmount: 5
    retryTimeoutMs: %d
  - resource: cb
    strategy: slowRatio
    maxAllowedRtMs: %d
    threshold: 0.5
    statIntervalMs: %d
    minRequestAmount: 5
    retryTimeoutMs: %d
`, window.Milliseconds(), retry.Milliseconds(), maxRt.Milliseconds(), window.Milliseconds(), retry.Milliseconds())))

	runPhase := func(name string, m int32, d time.Duration) cbPhase {
		t.Helper()
		mode.Store(m)
		up.resetStats()
		// The checks below use send times, not due times, so a sender that
		// falls somewhat behind does not change what they judge.
		res := run(t, load{Rate: rate, Duration: d, Targets: []target{to(g.URL + "/cb")}, MaxLag: 200 * time.Millisecond})
		res.checkLag(t)
		n, _ := up.stats()
		p := cbPhase{name: name, res: res, upstream: n}
		t.Logf("%-9s statuses %v, upstream received %d", name, res.statuses(), n)
		return p
	}

	// checkOpen: the breaker tripped within one window of the trouble
	// starting (plus, for slow calls, the time they take to be known slow),
	// and from then on the upstream saw only probes, spaced by the retry
	// timeout (plus, for slow probes, their own duration).
	checkOpen := func(p cbPhase, badStatus int, tripBy, probeGap time.Duration) {
		t.Helper()
		fb := p.firstBlock()
		if fb < 0 {
			t.Fatalf("%s: the breaker never opened: %v", p.name, p.res.statuses())
		}
		if at := p.res.hits[fb].sent; at > tripBy {
			t.Errorf("%s: first degrade block sent at %v, want within %v of the upstream going bad", p.name, at, tripBy)
		}
		if got := int64(len(p.forwarded())); got != p.upstream {
			t.Errorf("%s: %d requests were forwarded but the upstream received %d", p.name, got, p.upstream)
		}
		var probes []hit
		for _, h := range p.res.hits[fb:] {
			if h.status != http.StatusTooManyRequests {
				probes = append(probes, h)
			}
		}
		open := p.res.hits[len(p.res.hits)-1].sent - p.res.hits[fb].sent
		if maxProbes := int(open/probeGap) + 1; len(probes) > maxProbes {
			t.Errorf("%s: the upstream received %d requests in %v while open, want only probes (<= %d)", p.name, len(probes), open, maxProbes)
		}
		if len(probes) == 0 {
			t.Errorf("%s: no probe in %v open with retryTimeoutMs %v", p.name, open, retry)
		}
		// Sent times are the load generator's; a probe reaches the gateway
		// a little after it is sent, hence the slack.
		const slack = 50 * time.Millisecond
		for i := 1; i < len(probes); i++ {
			if gap := probes[i].sent - probes[i-1].sent; gap < probeGap-slack {
				t.Errorf("%s: probes %d and %d sent %v apart, want >= %v", p.name, i-1, i, gap, probeGap)
			}
		}
		for i, h := range probes {
			if h.status != badStatus {
				t.Errorf("%s: probe %d got %d, want %d (the upstream is still bad)", p.name, i, h.status, badStatus)
			}
		}
		t.Logf("%s: tripped after %d forwarded requests (first block sent at %v); %d probes in %v open",
			p.name, fb, p.res.hits[fb].sent, len(probes), open)
	}

	// checkRecovered: the first probe (within one retry timeout) closes the
	// breaker and everything sent after its answer flows. While the probe is
	// in flight the breaker is half-open and blocks the rest, as Sentinel's
	// does: a request sent then may get a 429 (a CI run on a busy machine
	// had 429s just after the probe's 200, where a sender running behind
	// may send several requests at once).
	checkRecovered := func(p cbPhase) {
		t.Helper()
		first := -1
		for i, h := range p.res.hits {
			if h.status == http.StatusOK {
				first = i
				break
			}
		}
		if first < 0 {
			t.Fatalf("%s: nothing passed after the upstream recovered: %v", p.name, p.res.statuses())
		}
		if at := p.res.hits[first].sent; at > retry+100*time.Millisecond {
			t.Errorf("%s: first pass sent at %v, want within retryTimeoutMs %v", p.name, at, retry)
		}
		// The gateway records the probe's outcome as its handler returns,
		// before net/http sends a small answer: a request sent after the
		// client has the answer finds the breaker closed.
		probe := p.res.hits[first]
		for i, h := range p.res.hits[first+1:] {
			if h.sent < probe.done && h.status == http.StatusTooManyRequests {
				continue
			}
			if h.status != http.StatusOK {
				t.Errorf("%s: request %d (sent at %v) after the probe closed the breaker (sent at %v, answered at %v) got %d, want 200",
					p.name, first+1+i, h.sent, probe.sent, probe.done, h.status)
				break
			}
		}
		if got := int64(len(p.forwarded())); got != p.upstream {
			t.Errorf("%s: %d requests were forwarded but the upstream received %d", p.name, got, p.upstream)
		}
	}

	healthy := runPhase("healthy", 0, time.Second)
	if got := healthy.res.count(200); got != len(healthy.res.hits) {
		t.Fatalf("healthy upstream: %v, want all 200", healthy.res.statuses())
	}

	// 500s: the good calls of the healthy cbPhase leave the window as the
	// errors come in; the ratio passes 0.5 about half a window in.
	failing := runPhase("500s", 1, 2500*time.Millisecond)
	checkOpen(failing, http.StatusInternalServerError, window, retry)
	cbBlockedHeaders(t, g.URL+"/cb", retry)
	checkRecovered(runPhase("recovered", 0, 1500*time.Millisecond))

	// Slow: a call is known slow only when it completes, slowFor after it
	// was sent; a slow probe holds the half-open state for slowFor too.
	slow := runPhase("slow", 2, 2500*time.Millisecond)
	checkOpen(slow, http.StatusOK, window+slowFor, retry+slowFor)
	checkRecovered(runPhase("recovered2", 0, 1500*time.Millisecond))

	cbTransitions(t, g)
}

// cbBlockedHeaders asks an open breaker directly: the block says degrade
// and Retry-After is the time left open, rounded up to whole seconds.
func cbBlockedHeaders(t *testing.T, url string, retry time.Duration) {
	t.Helper()
	// Right after a run the retry timeout may just have run out, making this
	// request the probe (it fails and re-opens): then the next one is blocked.
	for try := 0; try < 2; try++ {
		resp, body := get(t, url)
		if resp.StatusCode != http.StatusTooManyRequests {
			continue
		}
		if got := resp.Header.Get("X-Sluice-Blocked"); got != "degrade" {
			t.Errorf("X-Sluice-Blocked = %q, want degrade", got)
		}
		want := fmt.Sprint(int64((retry + time.Second - 1) / time.Second))
		if got := resp.Header.Get("Retry-After"); got != want {
			t.Errorf("Retry-After = %q, want %s (retryTimeoutMs rounded up)", got, want)
		}
		if !strings.Contains(body, `"reason":"degrade"`) {
			t.Errorf("block body %q does not name the degrade reason", body)
		}
		return
	}
	t.Errorf("an open breaker let two requests in a row through")
}

// cbTransitions reads the "circuit breaker" log events: each transition
// is logged once, they chain (from = the previous to), both bad spells
// opened and closed, and the metric ends closed.
func cbTransitions(t *testing.T, g *gateway) {
	t.Helper()
	evs := g.logs.Events("circuit breaker")
	var seq []string
	opened, closed := 0, 0
	last := map[string]string{}
	for _, ev := range evs {
		res, _ := ev["resource"].(string)
		from, _ := ev["from"].(string)
		to, _ := ev["to"].(string)
		seq = append(seq, from+">"+to)
		if res != "cb" {
			t.Errorf("circuit breaker event for resource %q, want cb", res)
		}
		if l, ok := last[res]; ok && l != from {
			t.Errorf("transition %s>%s does not follow the previous state %s", from, to, l)
		}
		last[res] = to
		if from == "closed" && to == "open" {
			opened++
		}
		if to == "closed" {
			closed++
		}
	}
	t.Logf("transitions: %s", strings.Join(seq, " "))
	if opened != 2 || closed != 2 {
		t.Errorf("closed>open %d times and >closed %d times, want 2 and 2", opened, closed)
	}
	if v := metric(t, g, `sluice_circuit_state{resource="cb"}`); v != "0" {
		t.Errorf("metrics: want sluice_circuit_state{resource=\"cb\"} 0 after recovery, got %q", v)
	}
}

// TestDegradeStateAcrossReload: an open breaker whose rule is unchanged stays
// open across a reload (the upstream still sees nothing); editing the rule
// starts a fresh, closed breaker, which the log and sluice_circuit_state
// report at once.
func TestDegradeStateAcrossReload(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	})
	rules := func(extraRoute string, threshold int) string {
		return rulesFor(up.URL, fmt.Sprintf(`
routes:
  - path: /cb
    upstream: up
    resource: cb
%s
degradeRules:
  - resource: cb
    strategy: errorCount
    threshold: %d
    minRequestAmount: 1
    retryTimeoutMs: 60000
`, extraRoute, threshold))
	}
	g := startGateway(t, rules("", 1))
	for i := 0; i < 2; i++ { // the second error trips errorCount 1
		if resp, _ := get(t, g.URL+"/cb"); resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("call %d: %d, want the upstream's 500", i, resp.StatusCode)
		}
	}
	state := func() string {
		t.Helper()
		if v := metric(t, g, `sluice_circuit_state{resource="cb"}`); v != "" {
			return v
		}
		return "(none)"
	}
	// reload waits for the "rules loaded" event of a file with routes routes
	// (each reload below changes the count, so events cannot be confused).
	reload := func(rules string, routes int) {
		t.Helper()
		g.writeRules(rules)
		poll(t, 10*time.Second, fmt.Sprintf("reload to %d routes", routes), func() string {
			for _, ev := range g.logs.Events("rules loaded") {
				if n, _ := ev["routes"].(float64); int(n) == routes {
					return ""
				}
			}
			return g.logs.String()
		})
	}
	blocked := func(when string) {
		t.Helper()
		resp, _ := get(t, g.URL+"/cb")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("X-Sluice-Blocked") != "degrade" {
			t.Errorf("%s: %d %q, want 429 degrade", when, resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"))
		}
	}
	blocked("after tripping")
	if m := state(); m != "1" {
		t.Errorf("sluice_circuit_state after tripping = %s, want 1 (open)", m)
	}

	// Another route added, the degrade rule untouched: still open.
	reload(rules("  - path: /other\n    upstream: up", 1), 2)
	up.resetStats()
	blocked("after a reload that kept the rule")
	if n, _ := up.stats(); n != 0 {
		t.Errorf("the upstream received %d requests from a breaker kept open", n)
	}

	// The rule edited: a new breaker, closed, and said so.
	reload(rules("  - path: /other\n    upstream: up\n  - path: /other2\n    upstream: up", 5), 3)
	if resp, _ := get(t, g.URL+"/cb"); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("after editing the rule: %d, want the upstream's 500 (a fresh breaker)", resp.StatusCode)
	}
	if m := state(); m != "0" {
		t.Errorf("sluice_circuit_state after editing the rule = %s, want 0 (closed)", m)
	}
	evs := g.logs.Events("circuit breaker")
	if len(evs) != 2 || evs[1]["from"] != "open" || evs[1]["to"] != "closed" {
		t.Errorf("circuit breaker events %v, want closed>open then open>closed", evs)
	}
}

// TestDegradeErrorStatuses: a breaker counts as errors the answers its
// errorStatuses name, and only those (plus no answer at all). Each case is
// its own route and breaker (errorCount 2: the third error trips it); ten
// requests in a row, answered by the upstream with one status. A breaker
// that counts the status lets three reach the upstream and blocks the rest
// (degrade); one that does not lets all ten through with the upstream's
// answer, 429s included.
func TestDegradeErrorStatuses(t *testing.T) {
	var mu sync.Mutex
	received := map[string]int{}
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received[r.URL.Path]++
		mu.Unlock()
		code, _ := strconv.Atoi(r.URL.Query().Get("s"))
		http.Error(w, "answer", code)
	})
	cases := []struct {
		path     string
		statuses string // "": the default, 5xx
		answer   int
		trips    bool
	}{
		{"/only429-500", "[429]", 500, false},
		{"/only429-429", "[429]", 429, true},
		{"/both-503", `["5xx", 429]`, 503, true},
		{"/both-429", `["5xx", 429]`, 429, true},
		{"/both-404", `["5xx", 429]`, 404, false},
		{"/default-429", "", 429, false},
		{"/default-500", "", 500, true},
	}
	var routes, rules strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&routes, "  - path: %s\n    upstream: up\n    resource: %s\n", c.path, c.path[1:])
		fmt.Fprintf(&rules, "  - resource: %s\n    strategy: errorCount\n    threshold: 2\n    minRequestAmount: 1\n    retryTimeoutMs: 60000\n", c.path[1:])
		if c.statuses != "" {
			fmt.Fprintf(&rules, "    errorStatuses: %s\n", c.statuses)
		}
	}
	g := startGateway(t, rulesFor(up.URL, "routes:\n"+routes.String()+"degradeRules:\n"+rules.String()))
	for _, c := range cases {
		t.Run(c.path[1:], func(t *testing.T) {
			var answers, blocked int
			for i := 0; i < 10; i++ {
				resp, _ := get(t, fmt.Sprintf("%s%s?s=%d", g.URL, c.path, c.answer))
				switch {
				case resp.Header.Get("X-Sluice-Blocked") == "degrade":
					blocked++
				case resp.StatusCode == c.answer:
					answers++
				default:
					t.Errorf("request %d: %d (X-Sluice-Blocked %q), want %d from the upstream or a degrade block",
						i, resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"), c.answer)
				}
			}
			mu.Lock()
			got := received[c.path]
			mu.Unlock()
			// A breaker learns of an answer as the gateway finishes it, which
			// the client may see a moment before: the request after the
			// third error may still pass.
			if c.trips && (got < 3 || got > 4 || blocked != 10-got) {
				t.Errorf("the upstream received %d and %d were blocked, want 3 (maybe 4) and the rest blocked: %d answers count as errors", got, blocked, c.answer)
			}
			if !c.trips && (got != 10 || answers != 10) {
				t.Errorf("the upstream received %d and the client got %d of its answers, want 10 and 10: %d answers are not errors", got, answers, c.answer)
			}
		})
	}
}

// TestDegradeProbeNum: with probeNum 3 a half-open breaker lets exactly
// three probes reach the upstream, however many requests arrive, and
// closes only once all three have succeeded; one failing opens it again.
// The upstream holds each probe until the test tells it how to answer.
func TestDegradeProbeNum(t *testing.T) {
	const retry = 500 * time.Millisecond
	var failing atomic.Bool
	failing.Store(true)
	answers := make(chan int)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
		select {
		case code := <-answers:
			http.Error(w, "probe answer", code)
		case <-r.Context().Done():
		}
	})
	g := startGateway(t, rulesFor(up.URL, fmt.Sprintf(`
routes:
  - path: /cb
    upstream: up
    resource: cb
degradeRules:
  - resource: cb
    strategy: errorCount
    threshold: 1
    minRequestAmount: 1
    retryTimeoutMs: %d
    probeNum: 3
`, retry.Milliseconds())))
	state := func() string { return metric(t, g, `sluice_circuit_state{resource="cb"}`) }
	blockedNow := func(when string) {
		t.Helper()
		resp, _ := get(t, g.URL+"/cb")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("X-Sluice-Blocked") != "degrade" {
			t.Fatalf("%s: %d %q, want 429 degrade", when, resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"))
		}
	}

	// Trip: two 500s (errorCount 1 trips on the second).
	for i := 0; i < 2; i++ {
		get(t, g.URL+"/cb")
	}
	poll(t, 10*time.Second, "the breaker opens", func() string {
		if s := state(); s != "1" {
			return "sluice_circuit_state " + s
		}
		return ""
	})
	failing.Store(false)

	// spell sends a request every 10 ms, each in its own goroutine, until
	// three have reached the upstream and 300 ms more have passed; it checks
	// that exactly three reached it and every other request was a degrade
	// block, and returns the probes' results.
	spell := func(name string) chan int {
		t.Helper()
		up.resetStats()
		probes := make(chan int, 3)
		var others sync.WaitGroup
		var wrong atomic.Int32
		deadline := time.Now().Add(retry + 5*time.Second)
		var enough time.Time
		sent := 0
		for time.Now().Before(deadline) && (enough.IsZero() || time.Since(enough) < 300*time.Millisecond) {
			others.Add(1)
			sent++
			go func() {
				defer others.Done()
				resp, err := http.Get(g.URL + "/cb")
				if err != nil {
					wrong.Add(1)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.Header.Get("X-Sluice-Blocked") == "degrade" {
					return
				}
				probes <- resp.StatusCode
			}()
			if n, _ := up.stats(); n >= 3 && enough.IsZero() {
				enough = time.Now()
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n, inFlight := up.stats(); n != 3 || inFlight != 3 {
			t.Fatalf("%s: the upstream received %d requests (%d at once) of %d sent to a half-open breaker, want exactly the 3 probes", name, n, inFlight, sent)
		}
		if s := state(); s != "2" {
			t.Errorf("%s: sluice_circuit_state %s with the probes out, want 2 (half-open)", name, s)
		}
		t.Logf("%s: %d requests sent, 3 reached the upstream", name, sent)
		go func() { others.Wait(); close(probes) }()
		return probes
	}
	answer := func(code int, probes chan int) {
		t.Helper()
		answers <- code
		if got := <-probes; got != code {
			t.Fatalf("a probe answered %d reached the client as %d", code, got)
		}
	}

	// First spell: two good probes do not close; the third failing re-opens.
	probes := spell("first half-open")
	answer(200, probes)
	answer(200, probes)
	blockedNow("two of three probes good")
	if s := state(); s != "2" {
		t.Errorf("two of three probes good: sluice_circuit_state %s, want 2 (half-open)", s)
	}
	answer(503, probes)
	blockedNow("the third probe failed")
	// The breaker hears of an answer as the gateway finishes it, which the
	// client may see a moment before.
	poll(t, 10*time.Second, "the third probe failed: the breaker opens", func() string {
		if s := state(); s != "1" {
			return "sluice_circuit_state " + s + ", want 1 (open)"
		}
		return ""
	})
	if n, _ := up.stats(); n != 3 {
		t.Errorf("the upstream received %d requests in the first spell, want 3", n)
	}

	// Second spell: all three good close the breaker, not before.
	probes = spell("second half-open")
	answer(200, probes)
	answer(200, probes)
	blockedNow("two of three probes good again")
	answer(200, probes)
	poll(t, 10*time.Second, "all three probes good: the breaker closes", func() string {
		if s := state(); s != "0" {
			return "sluice_circuit_state " + s + ", want 0 (closed)"
		}
		return ""
	})
	for range probes {
		t.Error("a blocked request reached the upstream")
	}
	go func() {
		for i := 0; i < 5; i++ {
			answers <- 200
		}
	}()
	for i := 0; i < 5; i++ {
		if resp, _ := get(t, g.URL+"/cb"); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d after the breaker closed: %d, want 200", i, resp.StatusCode)
		}
	}
}

// TestDegradeSlowReadersDoNotOpenSlowRatio: clients that read a large
// answer slowly keep the gateway writing for seconds, but the upstream gave
// it at once. A slowRatio breaker judges the upstream, so it stays closed
// and other clients are served; counted whole, those few readers would open
// the breaker for everyone. Only 127.0.0.1, two downloads of 24 MiB.
func TestDegradeSlowReadersDoNotOpenSlowRatio(t *testing.T) {
	t.Parallel()
	const size = 24 << 20
	payload := strings.Repeat("x", size)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			io.WriteString(w, payload)
			return
		}
		io.WriteString(w, "ok")
	})
	g := startGateway(t, fmt.Sprintf(`
upstreams:
  up:
    targets: [%q]
    timeout: 30s
routes:
  - path: /*
    upstream: up
    resource: dl
degradeRules:
  - resource: dl
    strategy: slowRatio
    maxAllowedRtMs: 1000
    threshold: 0.5
    minRequestAmount: 2
    statIntervalMs: 60000
    retryTimeoutMs: 60000
`, up.URL))

	// Two clients take the answer in 256 KiB reads 30 ms apart: about 3 s
	// each, most of it with the gateway's writes blocked on them (the
	// kernel's socket buffers hold a few MiB, not 24). The upstream's own
	// time is far under maxAllowedRtMs even on a busy machine.
	var wg sync.WaitGroup
	took := make([]time.Duration, 2)
	for i := range took {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			resp, err := http.Get(g.URL + "/big")
			if err != nil {
				t.Errorf("slow reader %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			buf := make([]byte, 256<<10)
			n := 0
			for {
				m, err := io.ReadFull(resp.Body, buf)
				n += m
				if err != nil {
					break
				}
				time.Sleep(30 * time.Millisecond)
			}
			took[i] = time.Since(start)
			if resp.StatusCode != 200 || n != size {
				t.Errorf("slow reader %d: %d, %d bytes, want 200 and %d", i, resp.StatusCode, n, size)
			}
		}()
	}
	wg.Wait()
	t.Logf("the slow readers took %v", took)
	for i, d := range took {
		if d < 2*time.Second {
			t.Fatalf("slow reader %d took only %v, not twice maxAllowedRtMs: the test shows nothing", i, d)
		}
	}
	if s := metric(t, g, `sluice_circuit_state{resource="dl"}`); s != "0" {
		t.Errorf("sluice_circuit_state %s after two slow readers of a fast upstream, want 0 (closed)", s)
	}
	if resp, _ := get(t, g.URL+"/small"); resp.StatusCode != 200 {
		t.Errorf("the next client got %d %q, want 200: slow readers opened the breaker", resp.StatusCode, resp.Header.Get("X-Sluice-Blocked"))
	}
}
