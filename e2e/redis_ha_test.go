package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/internal/redistest"
)

// A Redis that survives (docs/redis-ha.md): gateways counting cluster rules
// in a Redis watched by Sentinel, through a failover under load, and in a
// three-shard Redis Cluster, every process real and started by the test.

// haSeries scrapes a gateway's sluice_cluster_redis_up series: master ->
// value, and the form label they carry.
func haSeries(g *gateway) (series map[string]float64, form string) {
	m, err := scrapeMetrics(g.AdminURL)
	if err != nil {
		return nil, ""
	}
	series = map[string]float64{}
	for name, v := range m {
		rest, ok := strings.CutPrefix(name, "sluice_cluster_redis_up{")
		if !ok {
			continue
		}
		labels := strings.TrimSuffix(rest, "}")
		var master string
		for _, kv := range strings.Split(labels, ",") {
			k, val, _ := strings.Cut(kv, "=")
			val = strings.Trim(val, `"`)
			switch k {
			case "form":
				form = val
			case "master":
				master = val
			}
		}
		series[master] = v
	}
	return series, form
}

// haUpAt reports whether the gateway's only series is master addr, up.
func haUpAt(g *gateway, addr string) bool {
	s, _ := haSeries(g)
	return len(s) == 1 && s[addr] == 1
}

// TestRedisSentinelFailoverUnderLoad: a master, its replica and three
// Sentinels (with requirepass); two gateways share a global count of 40,
// each offered 60/s. The master is killed with SIGKILL at 4 s. Before, the
// two pass 40/s in all; while no master answers each falls back to the rule
// as a local one at its share of the count (40 / 2 gateways last seen live:
// 20/s each, still 40/s in all); once the Sentinels have
// promoted the replica the gateways find it by themselves and pass 40/s in
// all again, within a few seconds, with no restart. Every answer is a 200
// or a 429, and the metric and /api/rules name the new master, never the
// password.
func TestRedisSentinelFailoverUnderLoad(t *testing.T) {
	const password = "hunter2-sentinel"
	sen := redistest.StartSentinels(t, redistest.SentinelOptions{DownAfter: time.Second, Password: password})
	up := startUpstream(t, nil)
	rules := rulesFor(up.URL, fmt.Sprintf(`
routes:
  - path: /c
    upstream: up
    resource: c
flowRules:
  - resource: c
    count: 40
    clusterMode: true
    clusterConfig:
      thresholdType: global
      fallbackToLocalWhenFail: true
cluster:
  sentinel:
    masterName: %s
    addrs: [%s]
    password: %s
  namespace: %s
`, sen.MasterName, strings.Join(sen.Addrs(), ", "), password, clNamespace(t)))
	gs := clStartGateways(t, 2, rules)
	for i, g := range gs {
		if !haUpAt(g, sen.Master.Addr()) {
			s, form := haSeries(g)
			t.Fatalf("gateway %d: sluice_cluster_redis_up %v (form %q), want master %s up", i, s, form, sen.Master.Addr())
		}
	}

	const (
		killAt = 4 * time.Second
		// Global limiting after the failover is checked from the second
		// after next once both gateways found the new master, for 4 whole
		// seconds: the load stops when the watcher below sees them loaded
		// (half a second more covers the loadgens' later start and the
		// partial second they stop in). A failover takes about 2.3 s here,
		// so the load ends near 12 s; end caps it at 20 s, which leaves the
		// 3 s the check needs after one whose first election failed
		// (Sentinels try again after twice failover-timeout, 6 s).
		checkAfter = 4 * time.Second
		end        = 20 * time.Second
	)
	var mu sync.Mutex
	var promotedAt time.Duration
	downAt := make([]time.Duration, len(gs)) // the gauge of the old master went to 0
	upAt := make([]time.Duration, len(gs))   // the new master's gauge is 1
	stop := make(chan struct{})
	enough := make(chan struct{}) // closed when the load has run long enough to check
	var wg sync.WaitGroup
	var once sync.Once
	finish := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer finish()
	launched := time.Now()
	var whileUp clUpEvents // the master is not restarted: only the events before the kill
	wg.Go(func() {
		time.Sleep(killAt - time.Since(launched))
		whileUp.killing(gs)
		sen.Master.Kill()
	})
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			at := time.Since(launched)
			if at < killAt {
				continue
			}
			promoted := sen.AnyNames(sen.Replica.Addr())
			mu.Lock()
			if promoted && promotedAt == 0 {
				promotedAt = at
			}
			for i, g := range gs {
				s, _ := haSeries(g)
				if downAt[i] == 0 && s[sen.Master.Addr()] == 0 {
					downAt[i] = at
				}
				if upAt[i] == 0 && len(s) == 1 && s[sen.Replica.Addr()] == 1 {
					upAt[i] = at
				}
			}
			both := max(upAt[0], upAt[1])
			mu.Unlock()
			if upAt[0] != 0 && upAt[1] != 0 && at >= both.Truncate(time.Second)+2*time.Second+checkAfter+500*time.Millisecond {
				close(enough) // every time is recorded: the watch is over
				return
			}
		}
	})
	loads := clEach(gs, "/c", 60, end)
	for i := range loads {
		loads[i].Stop = enough
	}
	rs := clRunAll(t, loads)
	finish()

	whileUp.check(t, gs)
	// The first event after those is the kill's; any later one was logged
	// against the new master once found, up: a busy machine's late answer
	// (an i/o timeout 6 s after the kill while another test ran).
	for i, g := range gs[:len(whileUp.beforeKill)] { // none if the load ended before the kill
		evs := g.logs.Events("cluster: redis failing")
		clRedisFailedSlow(t, i, evs[min(len(whileUp.beforeKill[i])+1, len(evs)):])
	}
	clOnly200And429(t, "Sentinel failover", rs...)
	// The whole seconds every loadgen sent through: the load stops early,
	// within a second. A loadgen's next send would have been due 1/60 s
	// after its last (the millisecond absorbs the µs its times are cut to).
	secs := int(end / time.Second)
	for _, r := range rs {
		if n := len(r.hits); n > 0 {
			secs = min(secs, int((r.hits[n-1].due+time.Second/60+time.Millisecond)/time.Second))
		}
	}
	ps := clPerSecond(rs, secs)
	t.Logf("global count 40, 2 gateways x 60/s, master SIGKILLed at %v: passes per second %v; Sentinels promoted the replica at %v; gauge of the old master 0 at %v, new master 1 at %v",
		killAt, ps, promotedAt, downAt, upAt)
	if promotedAt == 0 {
		t.Fatalf("the Sentinels never promoted the replica")
	}
	back := max(upAt[0], upAt[1])
	for i := range gs {
		if downAt[i] == 0 || downAt[i]-killAt > 1500*time.Millisecond {
			t.Errorf("gateway %d: the old master's gauge went to 0 at %v, want within about 1 s of the kill at %v", i, downAt[i], killAt)
		}
		if upAt[i] == 0 || upAt[i]-promotedAt > 3*time.Second {
			t.Errorf("gateway %d: the new master's gauge was 1 at %v, want within 3 s of the promotion at %v", i, upAt[i], promotedAt)
		}
	}
	if t.Failed() {
		return
	}
	// global checks that [from, to) passed 40/s in all: ±10% over the span,
	// ±15% in each of its seconds (an exact window under a strictly periodic
	// overload can leave a freed token to the next send, so one second may
	// pass a few less), and never more than about 40 in a real second.
	global := func(what string, from, to int) {
		sum := 0
		for s := from; s < to; s++ {
			sum += ps[s]
			if !clWithin(ps[s], 40, 0.15) {
				t.Errorf("second %d, %s: %d passes in all, want 40 ±15%%", s, what, ps[s])
			}
		}
		if want := 40.0 * float64(to-from); !clWithin(sum, want, 0.10) {
			t.Errorf("seconds [%d, %d), %s: %d passes in all, want %.0f (40/s) ±10%%", from, to, what, sum, want)
		}
		span := clMerged(rs)
		span.hits = slices.DeleteFunc(slices.Clone(span.hits), func(h hit) bool {
			return h.sent < time.Duration(from)*time.Second || h.sent >= time.Duration(to)*time.Second
		})
		// Loadgens start a few ms apart, so merged send times may shift a little.
		if m := span.maxInWindow(200, time.Second); m > 44 {
			t.Errorf("%s: a real 1 s interval passed %d in all, want at most about 40", what, m)
		}
	}
	global("before the kill", 0, int(killAt/time.Second))
	// Local during: from 0.5 s after both gateways saw the master go until
	// a Sentinel named the new one, each gateway passes its share, 40/2 =
	// 20/s. No gateway can count in Redis before a Sentinel names the new
	// master (seen here within one 100 ms tick); its gauge may say so later
	// than its first decision there (0.3 s later in a run with a core busy),
	// which finds the global window empty and passes a burst of the count.
	// The passes come in a burst at the start of each second of the load
	// (120/s offered against 40 a second), so the check takes the whole
	// seconds inside the span: a part of a second holds a burst or none
	// (a span of 1.4 s held 40, not 56).
	local := [2]time.Duration{max(downAt[0], downAt[1]) + 500*time.Millisecond,
		min(promotedAt, upAt[0], upAt[1]) - 200*time.Millisecond}
	if from, to := int((local[0]+time.Second-1)/time.Second), int(local[1]/time.Second); to > from {
		got := 0
		for s := from; s < to; s++ {
			got += ps[s]
		}
		if want := 40.0 * float64(to-from); !clWithin(got, want, 0.15) {
			t.Errorf("during the failover, seconds [%d, %d) of [%v, %v): %d passes in all, want %.0f (each gateway's share, 20/s) ±15%%",
				from, to, local[0], local[1], got, want)
		}
	} else {
		t.Logf("the failover left no whole second of local limiting [%v, %v); its rate is not checked", local[0], local[1])
	}
	// Global again after: from 1 s after both found the new master.
	after := [2]time.Duration{back.Truncate(time.Second) + 2*time.Second, time.Duration(secs) * time.Second}
	if after[1]-after[0] < 3*time.Second {
		t.Fatalf("global limiting resumed at %v: less than 3 s of load left to check it", back)
	}
	global("after the failover", int(after[0]/time.Second), secs)
	// Nor in between, where cluster limiting resumes: while a gateway's
	// local passes are in its window, a call Redis lets through must fit
	// its share too (before that guard the second passed 80).
	for s, n := range ps {
		if n > 46 {
			t.Errorf("second %d: %d passes in all, want at most the count 40 (+15%%), the second cluster limiting resumed included", s, n)
		}
	}
	// The admin API names the form and the new master, never the password.
	for i, g := range gs {
		resp, body := get(t, g.AdminURL+"/api/rules")
		if resp.StatusCode != 200 || strings.Contains(body, password) {
			t.Errorf("gateway %d: /api/rules %d, shows the password: %v", i, resp.StatusCode, strings.Contains(body, password))
		}
		var doc struct {
			Cluster struct {
				Form    string
				Up      bool
				Masters []struct {
					Addr string
					Up   bool
				}
			}
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		c := doc.Cluster
		if c.Form != "sentinel" || !c.Up || len(c.Masters) != 1 || c.Masters[0].Addr != sen.Replica.Addr() {
			t.Errorf("gateway %d: /api/rules cluster = %+v, want form sentinel, up, master %s", i, c, sen.Replica.Addr())
		}
		if n := len(g.logs.Events("cluster: redis failing")); n != 1 {
			t.Errorf("gateway %d logged %d 'redis failing' events, want 1", i, n)
		}
	}
}

// TestRedisClusterSixRulesOverShards: a Redis Cluster of three shards (as
// redis-cli --cluster create builds it); two gateways share six global
// rules of counts 10 to 60, each gateway offered 75% of each count (150% in
// all). Each rule passes its count, within 10%, every answer is a 200 or a
// 429, and the rules' windows sit on more than one shard: each rule in one
// slot of its own, found by asking every node.
func TestRedisClusterSixRulesOverShards(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0, time.Second)
	up := startUpstream(t, nil)
	ns := clNamespace(t)
	var routes, rules strings.Builder
	counts := []int{10, 20, 30, 40, 50, 60}
	for i, c := range counts {
		fmt.Fprintf(&routes, "  - {path: /r%d, upstream: up, resource: r%d}\n", i, i)
		fmt.Fprintf(&rules, "  - {resource: r%d, count: %d, clusterMode: true}\n", i, c)
	}
	gs := clStartGateways(t, 2, rulesFor(up.URL, fmt.Sprintf(`
routes:
%sflowRules:
%scluster:
  clusterAddrs: [%s]
  namespace: %s
`, routes.String(), rules.String(), strings.Join(cl.Addrs(), ", "), ns)))
	// Rule i appears i+1 times in each loadgen's rotation: 21 targets at
	// 157.5/s is 7.5/s per unit of count 10 per gateway, 75% of each count.
	const secs = 6
	loads := make([]load, len(gs))
	for g, gw := range gs {
		var ts []target
		for i := range counts {
			for range i + 1 {
				ts = append(ts, to(gw.URL+"/r"+strconv.Itoa(i)))
			}
		}
		loads[g] = load{Rate: 157.5, Duration: secs * time.Second, MaxLag: clMaxLag, Targets: ts}
	}
	rs := clRunAll(t, loads)
	clOnly200And429(t, "Redis Cluster", rs...)
	for i, c := range counts {
		var per []*result
		for _, r := range rs {
			var hits []hit
			for j := range len(r.hits) {
				h := r.hits[j]
				// target index -> rule: targets 0, 1-2, 3-5, ...
				if ruleOf(h.target) == i {
					hits = append(hits, h)
				}
			}
			per = append(per, &result{hits: hits})
		}
		// From 1 s on: the first second may take a burst of every count.
		got := clPasses(per, time.Second, secs*time.Second)
		want := float64(c * (secs - 1))
		t.Logf("rule r%d, count %d: passes per second %v", i, c, clPerSecond(per, secs))
		if !clWithin(got, want, 0.10) {
			t.Errorf("rule r%d, count %d: %d passes in [1s, %ds), want %.0f ±10%%", i, c, got, secs, want)
		}
	}
	// Where the windows are: every node asked for the namespace's windows.
	shards := 0
	slotOf := map[string]int{}
	for _, n := range cl.Nodes {
		keys, err := n.Keys("*" + ns + ":w:*")
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			shards++
		}
		for _, k := range keys {
			slotOf[k] = cl.Slot(t, k)
		}
		t.Logf("node %s holds windows %v", n.Addr(), keys)
	}
	if len(slotOf) != len(counts) {
		t.Errorf("%d windows in the cluster, want one per rule (%d)", len(slotOf), len(counts))
	}
	if shards < 2 {
		t.Errorf("the six rules' windows sit on %d shard(s) of 3, want more than one", shards)
	}
	// The gauge has one series per shard's master, each up.
	for i, g := range gs {
		series, form := haSeries(g)
		if form != "cluster" || len(series) != 3 {
			t.Errorf("gateway %d: sluice_cluster_redis_up %v (form %q), want the 3 masters", i, series, form)
		}
		for _, n := range cl.Nodes {
			if series[n.Addr()] != 1 {
				t.Errorf("gateway %d: master %s: sluice_cluster_redis_up %v, want 1", i, n.Addr(), series[n.Addr()])
			}
		}
	}
}

// ruleOf maps a loadgen target index of TestRedisClusterSixRulesOverShards
// back to its rule: rule i owns targets i(i+1)/2 .. i(i+1)/2+i.
func ruleOf(target int) int {
	i := 0
	for (i+1)*(i+2)/2 <= target {
		i++
	}
	return i
}
