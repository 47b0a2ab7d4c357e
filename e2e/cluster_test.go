package e2e

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/internal/skipped"
)

// Cluster flow control (docs/cluster.md) against real gateway processes
// sharing Redis: clients paced under their share never refused, a global
// count across three gateways, avgLocal following the live
// gateways, Redis killed and restarted under load, and (SLUICE_BENCH=1) the
// cost of a cluster rule against the same rule local. Budget: about 35 s of
// load in all, plus the benchmark when asked for.

const clSharedRedis = "127.0.0.1:6379"

// clMaxLag is the send lag these tests tolerate (the harness's default is
// 50ms): two or three loadgens, gateways and Redis share 2 cores, and a
// request counts by when it was sent, so a late send shifts it by at most
// this much against windows checked over whole seconds.
const clMaxLag = 100 * time.Millisecond

// clNeedRedis fails under CI=true and skips elsewhere, loudly.
func clNeedRedis(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("REDIS NEEDED (CI=true): %s", why)
	}
	t.Skipf("SKIPPED, REDIS NEEDED: %s (these tests fail instead under CI=true)", why)
}

// clPing sends one PING to a Redis at addr.
func clPing(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// clZCard asks a Redis at addr for ZCARD key.
func clZCard(addr, key string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprintf(c, "*2\r\n$5\r\nZCARD\r\n$%d\r\n%s\r\n", len(key), key); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(line, ":") {
		return 0, fmt.Errorf("ZCARD answered %q", line)
	}
	return strconv.Atoi(strings.TrimSpace(line[1:]))
}

// clRedisURL returns the shared Redis's URL when it answers.
func clRedisURL(t *testing.T) string {
	t.Helper()
	if err := clPing(clSharedRedis); err != nil {
		clNeedRedis(t, "no redis at "+clSharedRedis+": "+err.Error())
	}
	return "redis://" + clSharedRedis + "/0"
}

// clNamespace is unique per test run, so tests never share a window.
func clNamespace(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "e2e-" + t.Name() + "-" + hex.EncodeToString(b[:])
}

// clRedis is a redis-server of the test's own on a free port, which the test
// kills (by PID) and restarts on the same port.
type clRedis struct {
	t    *testing.T
	port int
	cmd  *exec.Cmd
}

func clStartRedis(t *testing.T) *clRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		clNeedRedis(t, "redis-server not installed")
	}
	r := &clRedis{t: t, port: clFreePort(t)}
	r.start()
	t.Cleanup(r.kill)
	return r
}

func clFreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (r *clRedis) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }
func (r *clRedis) url() string  { return "redis://" + r.addr() + "/0" }

func (r *clRedis) start() {
	r.t.Helper()
	if err := r.startErr(); err != nil {
		r.t.Fatal(err)
	}
}

// startErr starts the server and waits until it answers; it may run on any
// goroutine.
func (r *clRedis) startErr() error {
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	r.cmd = cmd
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := clPing(r.addr())
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("private redis-server on %s did not answer: %w", r.addr(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill ends the server the test started, by its PID, and reaps it.
func (r *clRedis) kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// clRules is a gateway's rules: route /c (resource c) to the upstream, the
// given flow rules, and the cluster block.
func clRules(upURL, redisURL, ns, flowRules string) string {
	return rulesFor(upURL, fmt.Sprintf(`
routes:
  - path: /c
    upstream: up
    resource: c
  - path: /l
    upstream: up
    resource: l
flowRules:
%s
cluster:
  redis: %s
  namespace: %s
`, flowRules, redisURL, ns))
}

// clStartGateways starts n gateways with the same rules and waits until each
// has found Redis (its first heartbeat), so avgLocal counts all of them.
func clStartGateways(t *testing.T, n int, rules string) []*gateway {
	t.Helper()
	gs := make([]*gateway, n)
	for i := range gs {
		gs[i] = startGateway(t, rules)
	}
	for _, g := range gs {
		g.waitLog("cluster: redis reachable", 5*time.Second)
	}
	return gs
}

// clRunAll drives one load per gateway at once, each from its own loadgen
// process, and returns the results in the same order.
func clRunAll(t *testing.T, loads []load) []*result {
	t.Helper()
	out := make([]*result, len(loads))
	var wg sync.WaitGroup
	for i, l := range loads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = run(t, l) // on failure run marks t failed and ends this goroutine
		}()
	}
	wg.Wait()
	for i, r := range out {
		if r == nil {
			t.Fatalf("loadgen %d failed", i)
		}
	}
	for _, r := range out {
		r.checkLag(t)
	}
	// One timeline: each load's times count from its own start, and on a
	// busy machine the loads start tens of ms apart; a span [from, to) is
	// then the same instants for every gateway (a CI run counted 68 passes
	// of a 30/s cluster limit in "the first 2 s", the two loads' first 2 s
	// ending apart).
	origin := out[0].start
	for _, r := range out {
		if r.start.Before(origin) {
			origin = r.start
		}
	}
	for _, r := range out {
		shift := r.start.Sub(origin)
		for i := range r.hits {
			r.hits[i].due += shift
			r.hits[i].sent += shift
			r.hits[i].done += shift
		}
	}
	return out
}

// clEach is one load per gateway on path, rate req/s each.
func clEach(gs []*gateway, path string, rate float64, d time.Duration) []load {
	ls := make([]load, len(gs))
	for i, g := range gs {
		ls[i] = load{Rate: rate, Duration: d, MaxLag: clMaxLag, Targets: []target{to(g.URL + path)}}
	}
	return ls
}

// clPasses counts the 200s sent in [from, to) over all results.
func clPasses(rs []*result, from, to time.Duration) int {
	n := 0
	for _, r := range rs {
		for _, h := range r.hits {
			if h.sent >= from && h.sent < to && h.status == http.StatusOK {
				n++
			}
		}
	}
	return n
}

// clPerSecond is the 200s of all results per whole second of sending.
func clPerSecond(rs []*result, secs int) []int {
	out := make([]int, secs)
	for i := range out {
		out[i] = clPasses(rs, time.Duration(i)*time.Second, time.Duration(i+1)*time.Second)
	}
	return out
}

// clMerged is every hit of rs in one result (each loadgen's times start at
// its own launch, a few ms apart).
func clMerged(rs []*result) *result {
	m := &result{}
	for _, r := range rs {
		m.hits = append(m.hits, r.hits...)
	}
	return m
}

// clOnly200And429 fails on any other answer: a 5xx, or a transport error.
func clOnly200And429(t *testing.T, what string, rs ...*result) {
	t.Helper()
	for i, r := range rs {
		st := r.statuses()
		if st[200]+st[429] != len(r.hits) {
			t.Errorf("%s, gateway %d: statuses %v, want only 200 and 429", what, i, st)
		}
	}
}

// clWithin: got is within frac of want.
func clWithin(got int, want, frac float64) bool {
	return float64(got) >= want*(1-frac) && float64(got) <= want*(1+frac)
}

// clRedisKeptUp ends a test whose Redis was never stopped when a gateway
// still found it failing. An answer later than the cluster's deadline (a
// timeout) is the machine's: its cluster rules fell back to local limits, as
// documented, and the counts say the machine was busy, not that the cluster
// is wrong. Like checkLag, that skips the test by default and fails it with
// SLUICE_E2E_RATES=1. Any other error (a script Redis refuses, a refused
// connection) is a real failure and fails the test whatever the settings.
func clRedisKeptUp(t *testing.T, gs []*gateway) {
	t.Helper()
	for i, g := range gs {
		clRedisFailedSlow(t, i, g.logs.Events("cluster: redis failing"))
	}
}

// clLateAnswersSkip ends a test of exact fleet counts whose Redis was up
// all along when one of its calls had no answer within the cluster's
// timeout (20 ms by default): that call was decided by the fallback, as
// documented, and the fleet's count is the machine's, not the cluster's
// (a busy CI machine: a third call of a 3-a-minute fleet refused, or a
// pass saying r=1 for r=0). No late call fails nothing: the counts are
// then checked. Like clRedisKeptUp, it skips by default and fails with
// SLUICE_E2E_RATES=1.
func clLateAnswersSkip(t *testing.T, gs []*gateway) {
	t.Helper()
	for i, g := range gs {
		m, err := scrapeMetrics(g.AdminURL)
		if err != nil {
			t.Fatal(err)
		}
		if n := m[`sluice_cluster_unanswered_total{cause="timeout"}`]; n > 0 {
			msg := fmt.Sprintf("gateway %d had %v cluster calls unanswered within the timeout: the machine is too busy to count exactly", i, n)
			if !measuringRates() {
				skipped.Skip(t, idleNeed, msg)
			}
			t.Fatal(msg)
		}
	}
}

// clRedisFailedSlow is clRedisKeptUp for the failing events evs of gateway
// i, logged while its Redis was up: none, or all of them a busy machine's.
func clRedisFailedSlow(t *testing.T, i int, evs []map[string]any) {
	t.Helper()
	if len(evs) == 0 {
		return
	}
	for _, ev := range evs {
		if e, _ := ev["error"].(string); !clRedisSlow(e) {
			t.Fatalf("gateway %d found Redis failing, not from a busy machine: %v", i, ev["error"])
		}
	}
	msg := fmt.Sprintf("gateway %d found Redis failing %d times (%v): the machine is too busy to measure", i, len(evs), evs[0]["error"])
	if !measuringRates() {
		skipped.Skip(t, idleNeed, msg)
	}
	t.Fatal(msg)
}

// clUpEvents keeps the failing events each gateway logged while a Redis
// that a test kills and restarts was up: those logged before the kill, and
// those after the restart (a gateway logs one on a change of state only,
// so it fails again only once it has found Redis back). Only a busy
// machine's late answer can be among them; check sends them through
// clRedisFailedSlow. A gateway that fell back then passed its local share
// beside the fleet's count, as documented (a CI run: 73 passes in a second
// of a 40/s cluster limit), which the test must not count against it.
type clUpEvents struct {
	beforeKill [][]map[string]any
	atRestart  []int
}

// killing is called just before the kill.
func (u *clUpEvents) killing(gs []*gateway) {
	u.beforeKill = make([][]map[string]any, len(gs))
	for i, g := range gs {
		u.beforeKill[i] = g.logs.Events("cluster: redis failing")
	}
}

// restarting is called just before the restart.
func (u *clUpEvents) restarting(gs []*gateway) {
	u.atRestart = make([]int, len(gs))
	for i, g := range gs {
		u.atRestart[i] = len(g.logs.Events("cluster: redis failing"))
	}
}

// check is called once the load is over.
func (u *clUpEvents) check(t *testing.T, gs []*gateway) {
	t.Helper()
	for i, g := range gs {
		if i < len(u.beforeKill) {
			clRedisFailedSlow(t, i, u.beforeKill[i])
		}
		if i < len(u.atRestart) {
			clRedisFailedSlow(t, i, g.logs.Events("cluster: redis failing")[u.atRestart[i]:])
		}
	}
}

// clRedisSlow: a cluster error logged by a gateway says only that Redis
// answered later than the deadline (or the pool waited for a connection).
func clRedisSlow(err string) bool {
	for _, s := range []string{"context deadline exceeded", "i/o timeout", "redis: connection pool timeout"} {
		if strings.Contains(err, s) {
			return true
		}
	}
	return false
}

// clRedisUp scrapes a gateway's sluice_cluster_redis_up gauge.
func clRedisUp(g *gateway) (up, ok bool) {
	m, err := scrapeMetrics(g.AdminURL)
	if err != nil {
		return false, false
	}
	// One series per master node: up when every one is.
	up = true
	for series, v := range m {
		if strings.HasPrefix(series, "sluice_cluster_redis_up{") {
			up, ok = up && v == 1, true
		}
	}
	return up && ok, ok
}

// clRefusalsExplained sorts the 429s of clients paced at 99% of their share
// into those the machine can explain and the rest. Such a client has 1% of
// the interval to spare (slack): the call count calls after one comes that
// much later than the window needs. So a paced call is refused only if some
// decision of the interval before it came more than slack after its due
// time; a 429 is explained when some request due in that interval (any
// loadgen's: they start a few ms apart, hence the margin) was answered that
// late, since its answer time bounds when its gateway decided.
func clRefusalsExplained(rs []*result, interval, slack time.Duration) (explained, unexplained int, worst time.Duration) {
	for _, r := range rs {
		for _, q := range r.hits {
			if q.status != http.StatusTooManyRequests {
				continue
			}
			late := time.Duration(0)
			for _, o := range rs {
				for _, h := range o.hits {
					if h.due >= q.due-interval-50*time.Millisecond && h.due <= q.due {
						late = max(late, h.done-h.due)
					}
				}
			}
			worst = max(worst, late)
			if late >= slack {
				explained++
			} else {
				unexplained++
			}
		}
	}
	return explained, unexplained, worst
}

// TestClusterPacedClientsAreNeverRefused: two gateways share Redis; on each,
// a client paced at 99% of its share, for global and avgLocal counts, with
// statIntervalMs 10 s (count 5000 global: 247.5/s a client, at which the
// gateways hold leases; count 500 avgLocal: 49.5/s) and 1 s (count 100
// global, 50 avgLocal: 49.5/s; count 10 global: 4.95/s, of which the
// bucketed window refused 16%). The window is exact, so a client keeping
// under its share always finds room: on the 10 s rules, 1% of the interval
// is 100 ms to spare, more than the send lag the harness accepts, and no
// request may be refused (one the machine explains makes the run
// inconclusive). On the 1 s rules 1% is 10 ms, which this shared machine's
// lag often exceeds: a refusal there fails the test unless a late send or
// answer explains it (then it is logged). The rules do not fall back to
// local limiting: a call Redis does not answer within its 20 ms (a busy
// machine) passes. The local window is not what this test is about, and an
// avgLocal rule's local one, which also counts this gateway's cluster passes,
// holds 99% of its count here and can refuse.
//
// The 10 s rules need 15 s of load, and on this shared machine the run
// with them came out inconclusive (skipped) even when idle, so by default
// the test runs the 1 s rules for 5 s, and SLUICE_E2E_RATES=1 runs them all.
func TestClusterPacedClientsAreNeverRefused(t *testing.T) {
	redisURL := clRedisURL(t)
	up := startUpstream(t, nil)
	type paced struct {
		path, tt   string
		count, ivS int
		rate       float64 // a gateway's client: 99% of its share
	}
	rules := []paced{{"g", "global", 100, 1, 49.5}, {"a", "avgLocal", 50, 1, 49.5}, {"ten", "global", 10, 1, 4.95}}
	d := 5 * time.Second
	if measuringRates() {
		rules = append(rules, paced{"g10", "global", 5000, 10, 247.5}, paced{"a10", "avgLocal", 500, 10, 49.5})
		d = 15 * time.Second
	}
	var routes, flow strings.Builder
	for _, r := range rules {
		fmt.Fprintf(&routes, "  - path: /%s\n    upstream: up\n    resource: %s\n", r.path, r.path)
		fmt.Fprintf(&flow, "  - resource: %s\n    count: %d\n    statIntervalMs: %d\n    clusterMode: true\n    clusterConfig:\n      thresholdType: %s\n      fallbackToLocalWhenFail: false\n",
			r.path, r.count, r.ivS*1000, r.tt)
	}
	ns := clNamespace(t)
	gs := clStartGateways(t, 2, rulesFor(up.URL, fmt.Sprintf("routes:\n%sflowRules:\n%scluster:\n  redis: %s\n  namespace: %s\n",
		routes.String(), flow.String(), redisURL, ns)))
	// Watch the live gateways: avgLocal's limit follows them.
	stop := make(chan struct{})
	var dips []string
	var watch sync.WaitGroup
	watch.Go(func() {
		start := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if n, err := clZCard(clSharedRedis, "{"+ns+"}:gw"); err == nil && n != 2 {
				dips = append(dips, fmt.Sprintf("%d at %v", n, time.Since(start).Round(time.Millisecond)))
			}
		}
	})
	var loads []load // gateway-major: loads[g*len(rules)+i] is rule i on gateway g
	for _, g := range gs {
		for _, r := range rules {
			loads = append(loads, load{Rate: r.rate, Duration: d, MaxLag: clMaxLag, Targets: []target{to(g.URL + "/" + r.path)}})
		}
	}
	rs := clRunAll(t, loads)
	close(stop)
	watch.Wait()
	clRedisKeptUp(t, gs)
	clOnly200And429(t, "paced", rs...)
	var lags []time.Duration
	for _, r := range rs {
		lags = append(lags, r.maxLag)
	}
	t.Logf("loadgen max send lag %v; live gateways other than 2 during the run: %v", lags, dips)
	inconclusive := ""
	for i, rule := range rules {
		path := []*result{rs[i], rs[len(rules)+i]}
		iv := time.Duration(rule.ivS) * time.Second
		refused, sent := 0, 0
		for _, r := range path {
			refused += r.count(http.StatusTooManyRequests)
			sent += len(r.hits)
		}
		explained, unexplained, worst := clRefusalsExplained(path, iv, iv/100)
		name := fmt.Sprintf("%s count %d per %v (/%s)", rule.tt, rule.count, iv, rule.path)
		t.Logf("%s, 2 clients at %.4g/s (99%% of their share): %d of %d refused; passes per second %v; latest answer in the interval before a refusal %v after its due time",
			name, rule.rate, refused, sent, clPerSecond(path, int(d/time.Second)), worst)
		switch {
		case unexplained > 0:
			t.Errorf("%s: %d requests refused though paced under their share and answered in time (%d more the machine explains)", name, unexplained, explained)
		case explained > 0 && rule.ivS == 1:
			t.Logf("%s: %d refusals, each after a request answered over %v late: this machine's lag, not the gateway", name, explained, iv/100)
		case explained > 0:
			inconclusive += fmt.Sprintf("; %s: %d refusals after answers over %v late", name, explained, iv/100)
		}
	}
	if inconclusive != "" && !t.Failed() {
		if !measuringRates() {
			skipped.Skip(t, idleNeed, "the machine was too busy to tell"+inconclusive)
		}
		t.Fatalf("the machine was too busy to tell%s", inconclusive)
	}
}

// TestClusterGlobalCountAcrossThreeGateways: three gateways share a global
// count of 100; each is offered 150/s for 5 s. Alone, each would pass 100/s
// (300 in all); together they pass 100/s, within 10%.
func TestClusterGlobalCountAcrossThreeGateways(t *testing.T) {
	redisURL := clRedisURL(t)
	up := startUpstream(t, nil)
	gs := clStartGateways(t, 3, clRules(up.URL, redisURL, clNamespace(t), `
  - resource: c
    count: 100
    clusterMode: true
    clusterConfig:
      thresholdType: global
`))
	const secs = 5
	rs := clRunAll(t, clEach(gs, "/c", 150, secs*time.Second))
	clRedisKeptUp(t, gs)
	clOnly200And429(t, "global", rs...)
	ps := clPerSecond(rs, secs)
	per := make([]int, len(rs))
	for i, r := range rs {
		per[i] = r.count(200)
	}
	total := clPasses(rs, 0, secs*time.Second)
	t.Logf("global count 100, 3 gateways x 150/s: cluster passes per second %v, total %d in %d s (per gateway %v)", ps, total, secs, per)
	for i, n := range ps {
		if !clWithin(n, 100, 0.10) {
			t.Errorf("second %d: the cluster passed %d, want 100 ±10%%", i, n)
		}
	}
	if !clWithin(total, 100*secs, 0.10) {
		t.Errorf("total %d passes in %d s, want %d ±10%%", total, secs, 100*secs)
	}
	// Loadgens start a few ms apart, so merged send times may shift a little.
	if m := clMerged(rs).maxInWindow(200, time.Second); m > 110 {
		t.Errorf("a real 1 s interval passed %d across the cluster, want at most about 100", m)
	}
	for i, n := range per {
		if n == 0 {
			t.Errorf("gateway %d passed nothing: the shared count must be shared, not taken by one", i)
		}
	}
}

// TestClusterAvgLocalFollowsLiveGateways: avgLocal count 50 with three
// gateways passes about 150/s in all; one gateway is stopped at 3 s and the
// total drops to about 100/s; another is killed (SIGKILL: no goodbye, its
// heartbeat must expire) at 6 s and the total drops to about 50/s. Each
// drop must show within 10 s; here within 1 s and 4 s. Every window checked
// spans whole seconds: under steady overload a sliding window passes its
// count in a burst each interval, so half seconds hold anything from 0 to count.
func TestClusterAvgLocalFollowsLiveGateways(t *testing.T) {
	redisURL := clRedisURL(t)
	up := startUpstream(t, nil)
	gs := clStartGateways(t, 3, clRules(up.URL, redisURL, clNamespace(t), `
  - resource: c
    count: 50
    clusterMode: true
    clusterConfig:
      thresholdType: avgLocal
`))
	const (
		stopAt = 3 * time.Second
		killAt = 6 * time.Second
		end    = 12 * time.Second
	)
	var wg sync.WaitGroup
	defer wg.Wait() // also when the load fails: no stop after the test
	wg.Go(func() {
		time.Sleep(stopAt)
		gs[2].stop() // SIGTERM: its Service leaves the gateway set at once
	})
	wg.Go(func() {
		time.Sleep(killAt)
		_ = gs[1].cmd.Process.Kill()
	})
	rs := clRunAll(t, clEach(gs, "/c", 150, end))
	clRedisKeptUp(t, gs)
	// stopAt and killAt are from the loadgens' launch; each loadgen starts
	// a few ms later, which the 1 s margins absorb.
	ps := clPerSecond(rs, int(end/time.Second))
	t.Logf("avgLocal count 50: cluster passes per second %v (3 gateways until %v, 2 until %v, then 1)", ps, stopAt, killAt)
	// The gateway still up saw only 200s and 429s throughout.
	clOnly200And429(t, "avgLocal, gateway 0", rs[0])
	cases := []struct {
		what     string
		from, to time.Duration
		rate     float64
	}{
		{"3 gateways", 0, stopAt, 150},
		{"2 gateways, from 1 s after one stopped", stopAt + time.Second, killAt, 100},
		{"1 gateway, from 4 s after one was killed", killAt + 4*time.Second, end, 50},
	}
	for _, c := range cases {
		got := clPasses(rs, c.from, c.to)
		want := c.rate * (c.to - c.from).Seconds()
		if !clWithin(got, want, 0.12) {
			t.Errorf("%s [%v, %v): %d passes, want %.0f (%.0f/s) ±12%%", c.what, c.from, c.to, got, want, c.rate)
		}
	}
}

// TestClusterRedisKilledUnderLoad: two gateways share two global rules: /c
// count 100 with fallbackToLocalWhenFail (each gateway offered 150/s) and /l
// count 30 without it (each offered 75/s). Redis is killed at 2.5 s and
// restarted at 5.5 s. No request may get a 5xx or fail. During the outage
// each gateway applies /c's rule locally at its share, count / 2 gateways (50/s each,
// about 100/s in all, the count) from at most 1 s after the kill, and lets all of /l pass; after the restart
// both totals are back to their cluster counts within 5 s. The state changes
// show in sluice_cluster_redis_up and are logged once each. Windows checked
// span whole seconds (see TestClusterAvgLocalFollowsLiveGateways).
func TestClusterRedisKilledUnderLoad(t *testing.T) {
	rd := clStartRedis(t)
	up := startUpstream(t, nil)
	gs := clStartGateways(t, 2, clRules(up.URL, rd.url(), clNamespace(t), `
  - resource: c
    count: 100
    clusterMode: true
    clusterConfig:
      thresholdType: global
      fallbackToLocalWhenFail: true
  - resource: l
    count: 30
    clusterMode: true
    clusterConfig:
      thresholdType: global
      fallbackToLocalWhenFail: false
`))
	const (
		killAt    = 2500 * time.Millisecond
		restartAt = 5500 * time.Millisecond
		end       = 10500 * time.Millisecond
	)
	// Watch the gauge: when each gateway saw Redis go and come back.
	var mu sync.Mutex
	downSeen := make([]time.Duration, len(gs))
	upSeen := make([]time.Duration, len(gs))
	var restartErr error
	var whileUp clUpEvents
	stop := make(chan struct{})
	launched := time.Now()
	var wg sync.WaitGroup
	var once sync.Once
	finish := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer finish() // also when the load fails: no restart after the test's cleanup
	wg.Add(2)
	go func() {
		defer wg.Done()
		time.Sleep(killAt - time.Since(launched))
		whileUp.killing(gs)
		rd.kill()
		time.Sleep(restartAt - time.Since(launched))
		whileUp.restarting(gs)
		restartErr = rd.startErr()
	}()
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			at := time.Since(launched)
			for i, g := range gs {
				v, ok := clRedisUp(g)
				mu.Lock()
				switch {
				case !ok:
				case !v && at > killAt && downSeen[i] == 0:
					downSeen[i] = at
				case v && at > restartAt && upSeen[i] == 0:
					upSeen[i] = at
				}
				mu.Unlock()
			}
		}
	}()
	// Targets c, c, l at 225/s: 150/s to /c and 75/s to /l per gateway.
	loads := make([]load, len(gs))
	for i, g := range gs {
		loads[i] = load{Rate: 225, Duration: end, MaxLag: clMaxLag, Targets: []target{to(g.URL + "/c"), to(g.URL + "/c"), to(g.URL + "/l")}}
	}
	rs := clRunAll(t, loads)
	finish()
	if restartErr != nil {
		t.Fatal(restartErr)
	}

	clOnly200And429(t, "Redis killed and restarted", rs...)
	whileUp.check(t, gs)
	var cs, ls []*result
	for _, r := range rs {
		c := r.only(0)
		c.hits = append(c.hits, r.only(1).hits...)
		cs = append(cs, c)
		ls = append(ls, r.only(2))
	}
	secs := int(end / time.Second)
	// Cluster again from 0.5 s after both gateways found Redis back (at
	// least 1.5 s after the restart) to the end. While one gateway is back
	// and the other still local, the two pass 100 + 50 a second, as they
	// should: on a busy machine the second one can take 2 s to find Redis.
	// The span is whole seconds: the 1 s windows pass their count in a burst
	// at each window's start, so a span of 3.5 s holds 3 or 4 bursts and
	// reads 90 or 120 for a 30/s limit, never the 105 it wants (failed CI).
	from := max(restartAt+1500*time.Millisecond, max(upSeen[0], upSeen[1])+500*time.Millisecond)
	after := [2]time.Duration{from, from + (end - from).Truncate(time.Second)}
	if after[1]-after[0] < 2*time.Second {
		msg := fmt.Sprintf("the gateways found Redis back at %v, %v after the restart at %v: less than 2 s left to check the cluster limits again; the machine is too busy to measure", upSeen, max(upSeen[0], upSeen[1])-restartAt, restartAt)
		if !measuringRates() {
			skipped.Skip(t, idleNeed, msg)
		}
		t.Fatal(msg)
	}
	t.Logf("Redis down [%v, %v); passes per second: /c (count 100, fallback) %v, /l (count 30, no fallback) %v; gauge down at %v, up at %v",
		killAt, restartAt, clPerSecond(cs, secs), clPerSecond(ls, secs), downSeen, upSeen)
	outage := [2]time.Duration{killAt + time.Second, restartAt}
	checks := []struct {
		what string
		rs   []*result
		span [2]time.Duration
		rate float64
	}{
		{"/c, cluster before the kill", cs, [2]time.Duration{0, 2 * time.Second}, 100},
		// a global count falls back to each gateway's share: count / 2
		{"/c, gateway 0 alone, local rule from 1 s after the kill", cs[:1], outage, 50},
		{"/c, gateway 1 alone, local rule from 1 s after the kill", cs[1:], outage, 50},
		{"/c, cluster again once both gateways found Redis", cs, after, 100},
		{"/l, cluster before the kill", ls, [2]time.Duration{0, 2 * time.Second}, 30},
		{"/l, everything passes from 1 s after the kill", ls, outage, 150},
		{"/l, cluster again once both gateways found Redis", ls, after, 30},
	}
	for _, c := range checks {
		got := clPasses(c.rs, c.span[0], c.span[1])
		want := c.rate * (c.span[1] - c.span[0]).Seconds()
		if !clWithin(got, want, 0.12) {
			t.Errorf("%s [%v, %v): %d passes, want %.0f (%.0f/s) ±12%%", c.what, c.span[0], c.span[1], got, want, c.rate)
		}
	}
	for i, g := range gs {
		if downSeen[i] == 0 || downSeen[i]-killAt > 1500*time.Millisecond {
			t.Errorf("gateway %d: sluice_cluster_redis_up went to 0 at %v, want within about 1 s of the kill at %v", i, downSeen[i], killAt)
		}
		if upSeen[i] == 0 || upSeen[i]-restartAt > 5*time.Second {
			t.Errorf("gateway %d: sluice_cluster_redis_up back to 1 at %v, want within 5 s of the restart at %v", i, upSeen[i], restartAt)
		}
		if n := len(g.logs.Events("cluster: redis failing")); n != 1 {
			t.Errorf("gateway %d logged %d 'redis failing' events, want exactly 1 (once per state change, not per request)", i, n)
		}
		if n := len(g.logs.Events("cluster: redis reachable again")); n != 1 {
			t.Errorf("gateway %d logged %d 'redis reachable again' events, want exactly 1", i, n)
		}
	}
}

// TestClusterBenchmark (SLUICE_BENCH=1, needs hey on PATH or in ~/go/bin):
// one gateway, two routes with the same never-blocking rule, one clusterMode
// and one local; closed-loop load with hey, alternating, and the cluster
// route's requests/s must be at least 70% of the local one's. Run it without
// -race: the upstream runs in the test process.
func TestClusterBenchmark(t *testing.T) {
	if os.Getenv("SLUICE_BENCH") != "1" {
		t.Skip("set SLUICE_BENCH=1 to measure a cluster rule against a local one")
	}
	hey, err := exec.LookPath("hey")
	if err != nil {
		hey = filepath.Join(os.Getenv("HOME"), "go", "bin", "hey")
		if _, err := os.Stat(hey); err != nil {
			t.Skip("hey not found: go install github.com/rakyll/hey@latest")
		}
	}
	conc := 32
	if v, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_CONC")); err == nil && v > 0 {
		conc = v
	}
	redisURL := clRedisURL(t)
	up := startUpstream(t, nil)
	g := clStartGateways(t, 1, clRules(up.URL, redisURL, clNamespace(t), `
  - resource: c
    count: 1000000000
    clusterMode: true
  - resource: l
    count: 1000000000
`))[0]
	type stat struct{ rps, p99 float64 }
	measure := func(path string) stat {
		out, err := exec.Command(hey, "-z", "3s", "-c", strconv.Itoa(conc), g.URL+path).CombinedOutput()
		if err != nil {
			t.Fatalf("hey: %v\n%s", err, out)
		}
		s := string(out)
		rps := regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`).FindStringSubmatch(s)
		p99 := regexp.MustCompile(`99%+ in ([0-9.]+) secs`).FindStringSubmatch(s)
		codes := regexp.MustCompile(`\[(\d+)\]\s+\d+ responses`).FindAllStringSubmatch(s, -1)
		if rps == nil || p99 == nil || len(codes) != 1 || codes[0][1] != "200" {
			t.Fatalf("hey %s: want only 200s and a summary:\n%s", path, s)
		}
		r, _ := strconv.ParseFloat(rps[1], 64)
		p, _ := strconv.ParseFloat(p99[1], 64)
		return stat{r, p * 1000}
	}
	measure("/l") // warm up connections and both code paths
	measure("/c")
	var local, clus []stat
	for range 2 {
		local = append(local, measure("/l"))
		clus = append(clus, measure("/c"))
	}
	avg := func(ss []stat) stat {
		var a stat
		for _, s := range ss {
			a.rps += s.rps / float64(len(ss))
			a.p99 += s.p99 / float64(len(ss))
		}
		return a
	}
	l, c := avg(local), avg(clus)
	ratio := c.rps / l.rps
	t.Logf("hey -z 3s -c %d, 2 runs each: local rule %.0f req/s p99 %.2f ms; cluster rule %.0f req/s p99 %.2f ms; cluster/local %.0f%%",
		conc, l.rps, l.p99, c.rps, c.p99, 100*ratio)
	if v, ok := clRedisUp(g); !ok || !v {
		t.Errorf("the breaker opened during the benchmark (sluice_cluster_redis_up is not 1): the cluster numbers include local fallbacks")
	}
	if n := len(g.logs.Events("cluster: redis failing")); n != 0 {
		t.Errorf("Redis was reported failing %d times during the benchmark", n)
	}
	if ratio < 0.7 {
		t.Errorf("cluster rule throughput is %.0f%% of local, want at least 70%%", 100*ratio)
	}
}

// TestClusterGatewayStartsWithoutRedis: two gateways start while their Redis
// is down. They serve at once, each applying the rule locally (5 each, 10 in
// all), report Redis down, and once Redis starts they find it by themselves
// and, once their local passes have left the window, share the count again
// (5 in all). Until then a call Redis lets through must fit the local
// window too (docs/cluster.md, When Redis fails), which is already full.
func TestClusterGatewayStartsWithoutRedis(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		clNeedRedis(t, "redis-server not installed")
	}
	rd := &clRedis{t: t, port: clFreePort(t)}
	t.Cleanup(rd.kill)
	up := startUpstream(t, nil)
	rules := clRules(up.URL, rd.url(), clNamespace(t), `
  - resource: c
    count: 5
    clusterMode: true
`)
	gs := []*gateway{startGateway(t, rules), startGateway(t, rules)}
	burst := func() (passes int) {
		for range 8 {
			for _, g := range gs {
				resp, _ := get(t, g.URL+"/c")
				switch resp.StatusCode {
				case 200:
					passes++
				case 429:
				default:
					t.Errorf("status %d, want 200 or 429", resp.StatusCode)
				}
			}
		}
		return passes
	}
	if p := burst(); p != 10 {
		t.Errorf("Redis down: %d of 16 passed, want 10 (count 5 on each gateway, locally)", p)
	}
	alone := time.Now() // the last call decided locally
	// Every call was the fallback's, and sluice_cluster_unanswered_total
	// says so: 8 on each gateway, whatever the cause (a refused dial, then
	// the breaker open).
	unanswered := func(g *gateway) float64 {
		m, err := scrapeMetrics(g.AdminURL)
		if err != nil {
			t.Fatal(err)
		}
		n := 0.0
		for series, v := range m {
			if strings.HasPrefix(series, "sluice_cluster_unanswered_total{") {
				n += v
			}
		}
		return n
	}
	for i, g := range gs {
		if n := unanswered(g); n != 8 {
			t.Errorf("gateway %d: sluice_cluster_unanswered_total sums to %v, want 8 (each call the fallback decided)", i, n)
		}
	}
	for i, g := range gs {
		g.waitLog("cluster: redis failing", 5*time.Second)
		if v, ok := clRedisUp(g); !ok || v {
			t.Errorf("gateway %d: sluice_cluster_redis_up is not 0 while Redis is down", i)
		}
	}
	rd.start()
	for i, g := range gs {
		g.waitLog("cluster: redis reachable again", 3*time.Second)
		if v, ok := clRedisUp(g); !ok || !v {
			t.Errorf("gateway %d: sluice_cluster_redis_up is not 1 once Redis answers", i)
		}
	}
	time.Sleep(time.Until(alone.Add(1100 * time.Millisecond))) // the 1 s window, and a margin
	p := burst()
	if p != 5 || unanswered(gs[0]) != 8 || unanswered(gs[1]) != 8 {
		// The calls of the outage were a refused dial, then the breaker
		// open: none a timeout. One now is a busy machine's late answer,
		// decided by the fallback and counted (9 once).
		clLateAnswersSkip(t, gs)
	}
	if p != 5 {
		t.Errorf("Redis up: %d of 16 passed, want 5 (count 5 for the cluster)", p)
	}
	for i, g := range gs {
		if n := unanswered(g); n != 8 {
			t.Errorf("gateway %d: sluice_cluster_unanswered_total sums to %v once Redis answers, want still 8", i, n)
		}
	}
}

// TestClusterRedisSlowIsOnlyATimeout: only a timeout lets clRedisKeptUp skip
// a cluster test; a Redis that refuses the gateway's scripts or connections
// is a failure the skip must not hide (under CI=true as anywhere).
func TestClusterRedisSlowIsOnlyATimeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  string
		slow bool
	}{
		{"context deadline exceeded", true},
		{"read tcp 127.0.0.1:51234->127.0.0.1:6379: i/o timeout", true},
		{"redis: connection pool timeout", true},
		{"dial tcp 127.0.0.1:6379: connect: connection refused", false},
		{"ERR user_script:12: Script attempted to access nonexistent global variable 'x'", false},
		{"WRONGTYPE Operation against a key holding the wrong kind of value", false},
		{"NOAUTH Authentication required.", false},
		{"", false},
	} {
		if got := clRedisSlow(c.err); got != c.slow {
			t.Errorf("clRedisSlow(%q) = %v, want %v", c.err, got, c.slow)
		}
	}
}
