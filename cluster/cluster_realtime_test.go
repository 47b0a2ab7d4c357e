package cluster_test

// These tests run in real time on Redis's clock: a few seconds each, with
// generous pacing and tolerances.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
	"sluice/internal/passcheck"
)

// offer calls Acquire on each service at perSecond for d and returns the
// local times of the passes. Each service's load comes from several paced
// goroutines so that one slow call (a loaded CI machine) does not thin it.
func offer(t *testing.T, svcs []*cluster.Service, rule *config.FlowRule, perSecond int, d time.Duration) (passes []time.Duration, decided int) {
	t.Helper()
	const workers = 5
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	errs := 0
	for _, s := range svcs {
		for range workers {
			wg.Go(func() {
				tick := time.NewTicker(time.Second * workers / time.Duration(perSecond))
				defer tick.Stop()
				for range tick.C {
					now := time.Since(start)
					if now >= d {
						return
					}
					t0 := time.Now()
					ok, err := s.Acquire(rule, "", 1)
					took := time.Since(t0)
					mu.Lock()
					lat = append(lat, took)
					if err != nil {
						errs++
					} else {
						decided++
						if ok {
							passes = append(passes, now)
						}
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		t.Logf("offered %.0f/s for %v: %d calls decided, %d without a decision; Acquire p50 %v p99 %v max %v",
			float64(perSecond*len(svcs)), d, decided, errs, lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
	}
	sort.Slice(passes, func(i, j int) bool { return passes[i] < passes[j] })
	return passes, decided
}

// checkRate asserts the cluster total: never above want+10% and not below
// want-10%. The lower bound means something only if the test managed to
// offer at least twice want; when its own callers starved, the run fails as
// "machine too busy" (like the e2e sender's lag check) rather than passing
// with the bound unchecked.
func checkRate(t *testing.T, passes []time.Duration, decided int, d time.Duration, want float64) {
	t.Helper()
	rate := float64(len(passes)) / d.Seconds()
	if rate > want*1.1 {
		t.Errorf("cluster total %.1f/s, want at most %.0f (+10%%)", rate, want*1.1)
	}
	if float64(decided) < 2*want*d.Seconds() {
		t.Fatalf("machine too busy to measure: only %d calls decided in %v, under twice the limit", decided, d)
	}
	if rate < want*0.9 {
		t.Errorf("cluster total %.1f/s, want at least %.0f (-10%%)", rate, want*0.9)
	}
}

// Passes asked what they leave count the fleet's passes down, whichever
// gateway takes them: 5 a minute over two gateways say 4, 3, 2, 1, 0 left,
// each with the time until the first pass leaves the minute; then both
// refuse.
func TestPassesSayWhatTheFleetHasLeft(t *testing.T) {
	url, ns := redisURL(t), namespace(t)
	svcs := []*cluster.Service{
		newService(t, cluster.Options{URL: url, Namespace: ns, Timeout: time.Second}),
		newService(t, cluster.Options{URL: url, Namespace: ns, Timeout: time.Second}),
	}
	rule := qpsRule(5, config.ThresholdGlobal)
	rule.StatIntervalMs = 60000
	start := time.Now()
	for i := range 7 {
		ok, retry, left, reset, err := svcs[i%2].AcquireFlow(rule, "", 1, true)
		elapsed := time.Since(start)
		switch {
		case err != nil:
			t.Fatalf("call %d: %v", i, err)
		case i < 5 && (!ok || left != int64(4-i) || reset > time.Minute || reset < time.Minute-elapsed-time.Second):
			t.Errorf("call %d on gateway %d: ok %v, left %d, reset %v; want a pass with %d left, reset about a minute", i, i%2, ok, left, reset, 4-i)
		case i >= 5 && (ok || retry < 50*time.Second):
			t.Errorf("call %d on gateway %d: ok %v, retry %v; want a block for about a minute", i, i%2, ok, retry)
		}
	}
}

func TestGlobalCountAcrossThreeGateways(t *testing.T) {
	url := redisURL(t)
	ns := namespace(t)
	var svcs []*cluster.Service
	for range 3 {
		svcs = append(svcs, newService(t, cluster.Options{URL: url, Namespace: ns, Timeout: time.Second}))
	}
	rule := qpsRule(100, config.ThresholdGlobal)
	const d = 3 * time.Second
	passes, decided := offer(t, svcs, rule, 150, d) // 450/s offered against 100/s
	peak := passcheck.MostInInterval(passes, time.Second)
	t.Logf("global count 100/s, 3 gateways x 150/s for %v: %d passes = %.1f/s; most in any 1s: %d",
		d, len(passes), float64(len(passes))/d.Seconds(), peak)
	checkRate(t, passes, decided, d, 100)
	if peak > 110 {
		t.Errorf("%d passes in one real second, want <= 110", peak)
	}
}

func TestAvgLocalCountsLiveGateways(t *testing.T) {
	url := redisURL(t)
	ns := namespace(t)
	const beat = 500 * time.Millisecond
	var svcs []*cluster.Service
	var stops []context.CancelFunc
	for range 3 {
		s, err := cluster.New(cluster.Options{URL: url, Namespace: ns, Timeout: time.Second, Heartbeat: beat})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		stop := func() { cancel(); <-done }
		t.Cleanup(func() { stop(); s.Close() })
		svcs = append(svcs, s)
		stops = append(stops, stop)
	}
	// How many gateways the cluster counts: a count-1 avgLocal rule lets
	// exactly that many calls through for a fresh key.
	probe := qpsRule(1, config.ThresholdAvgLocal)
	probe.StatIntervalMs = 60000
	probes := 0
	liveAt := func(s *cluster.Service) int {
		probes++
		key := "probe-" + time.Now().String()
		n := 0
		for range 5 {
			ok, err := s.Acquire(probe, key, 1)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				n++
			}
		}
		return n
	}
	live := func() int { return liveAt(svcs[0]) }
	// Every gateway has read the three live ones (each passes its own
	// reading with its calls) before the load starts.
	for i, s := range svcs {
		waitFor(t, 3*time.Second, fmt.Sprintf("gateway %d counts three gateways", i), func() bool { return liveAt(s) == 3 })
	}

	rule := qpsRule(50, config.ThresholdAvgLocal)
	const d = 3 * time.Second
	passes, decided := offer(t, svcs, rule, 150, d)
	t.Logf("avgLocal count 50/s, 3 live gateways x 150/s for %v: %d passes = %.1f/s; most in any 1s: %d",
		d, len(passes), float64(len(passes))/d.Seconds(), passcheck.MostInInterval(passes, time.Second))
	checkRate(t, passes, decided, d, 150)

	svcs[2].StopBeating() // gateway 3 crashed: no goodbye
	took := waitFor(t, 5*time.Second, "stopped gateway dropped out", func() bool { return live() == 2 })
	t.Logf("a gateway that stopped beating (heartbeat %v, expiry 3x) dropped out after %v", beat, took)

	// A shutdown leaves the set at its signal (Run's ctx ends), not after
	// its drain (Close): it takes no new calls, and its share counted for
	// the whole drain. The others read it within a quarter heartbeat while
	// an avgLocal rule is in use (live() keeps one in use). Its calls in
	// flight still reach Redis until Close.
	stops[1]()
	took = waitFor(t, beat, "a gateway shutting down dropped out", func() bool { return live() == 1 })
	t.Logf("a gateway shutting down dropped out after %v", took)
	if _, err := svcs[1].Acquire(rule, "in-flight", 1); err != nil {
		t.Errorf("a draining gateway's call: %v", err)
	}
	svcs[1].Close()
	if n := live(); n != 1 {
		t.Errorf("after the draining gateway's Close, %d live gateways, want 1", n)
	}
}

func TestRedisDeathAndReturn(t *testing.T) {
	srv := startPrivateRedis(t)
	var states stateLog
	const timeout = 50 * time.Millisecond
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: namespace(t), Timeout: timeout,
		Heartbeat: 100 * time.Millisecond, OnState: states.on})
	rule := qpsRule(1000, config.ThresholdGlobal)
	if ok, err := s.Acquire(rule, "", 1); !ok || err != nil {
		t.Fatalf("redis up: Acquire = %v, %v", ok, err)
	}
	// The first heartbeat reports the initial state, so a gauge starts right.
	waitFor(t, 5*time.Second, "OnState(true) for the first heartbeat", func() bool { return states.ups.Load() == 1 })

	srv.kill()
	var slowest time.Duration
	for i := range 50 {
		start := time.Now()
		ok, err := s.Acquire(rule, "", 1)
		slowest = max(slowest, time.Since(start))
		if err == nil {
			t.Fatalf("call %d after redis died = %v, nil error", i, ok)
		}
	}
	t.Logf("redis killed: slowest of 50 Acquire calls took %v (timeout %v)", slowest, timeout)
	if slowest > timeout+200*time.Millisecond {
		t.Errorf("Acquire took %v with redis dead, want about the timeout %v", slowest, timeout)
	}
	if s.Up() {
		t.Error("Up() = true with redis dead")
	}
	if _, err := s.Acquire(rule, "", 1); !errors.Is(err, cluster.ErrUnavailable) {
		t.Errorf("breaker open: err = %v, want ErrUnavailable", err)
	}
	if n := states.downs.Load(); n != 1 {
		t.Errorf("OnState(false) called %d times, want once", n)
	}

	restart := time.Now()
	srv.start() // same port, empty: the script cache is gone too (NOSCRIPT path)
	waitFor(t, 5*time.Second, "Up() after redis restarted", s.Up)
	took := time.Since(restart)
	t.Logf("redis restarted: Up() again after %v", took)
	if ok, err := s.Acquire(rule, "", 1); !ok || err != nil {
		t.Errorf("redis back: Acquire = %v, %v; want a pass", ok, err)
	}
	if d, u := states.downs.Load(), states.ups.Load(); d != 1 || u != 2 {
		t.Errorf("OnState calls: %d down, %d up; want 1 down and 2 up (start, return)", d, u)
	}
}

func TestSlowRedisTimesOut(t *testing.T) {
	srv := startPrivateRedis(t)
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: namespace(t), Timeout: 30 * time.Millisecond})
	rule := qpsRule(1000, config.ThresholdGlobal)
	opt, _ := redis.ParseURL(srv.url())
	admin := redis.NewClient(opt)
	defer admin.Close()
	if ok, err := s.Acquire(rule, "", 1); !ok || err != nil {
		t.Fatalf("redis up: Acquire = %v, %v", ok, err)
	}
	// CLIENT PAUSE holds every other client's commands: Redis is "slow".
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "500", "ALL").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	start := time.Now()
	_, err := s.Acquire(rule, "", 1)
	took := time.Since(start)
	if !errors.Is(err, cluster.ErrTimeout) {
		t.Fatalf("Acquire against a paused redis: err = %v, want ErrTimeout", err)
	}
	t.Logf("blocked redis: Acquire gave up after %v with %v", took, err)
	if took > 250*time.Millisecond {
		t.Errorf("Acquire waited %v for a blocked redis, want about 30ms", took)
	}
}

func TestRedisDeathUnderLoad(t *testing.T) {
	srv := startPrivateRedis(t)
	var states stateLog
	const timeout = 50 * time.Millisecond
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: namespace(t), Timeout: timeout,
		Heartbeat: 100 * time.Millisecond, OnState: states.on})
	rule := qpsRule(1e9, config.ThresholdGlobal)

	var mu sync.Mutex
	var slowest time.Duration
	var passed, failed int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				ok, err := s.Acquire(rule, "", 1)
				took := time.Since(t0)
				mu.Lock()
				slowest = max(slowest, took)
				if err != nil {
					failed++
				} else if ok {
					passed++
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		})
	}
	waitFor(t, 5*time.Second, "OnState(true) for the first heartbeat", func() bool { return states.ups.Load() == 1 })
	time.Sleep(200 * time.Millisecond)
	srv.kill()
	waitFor(t, 5*time.Second, "breaker open after redis died", func() bool { return !s.Up() })
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	passedBefore := passed
	mu.Unlock()
	srv.start()
	waitFor(t, 5*time.Second, "Up() after redis restarted", s.Up)
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("8 callers through kill and restart: %d passed, %d without a decision, slowest call %v (timeout %v)",
		passed, failed, slowest, timeout)
	if slowest > timeout+200*time.Millisecond {
		t.Errorf("a call took %v, want about the timeout %v at most", slowest, timeout)
	}
	if failed == 0 {
		t.Error("no call reported Redis's death")
	}
	if passed == passedBefore {
		t.Error("no call passed after redis came back")
	}
	if d, u := states.downs.Load(), states.ups.Load(); d != 1 || u != 2 {
		t.Errorf("OnState calls: %d down, %d up; want 1 down and 2 up (start, return)", d, u)
	}
}

// evalCalls is how many scripts Redis has run (EVAL + EVALSHA).
func evalCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	stats, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(stats, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if rest, ok := strings.CutPrefix(line, cmd); ok {
				n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				total += n
			}
		}
	}
	return total
}

func TestBlockedCallsSkipRedisUntilATokenFrees(t *testing.T) {
	srv := startPrivateRedis(t)
	var states stateLog
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: namespace(t), Timeout: time.Second, Heartbeat: time.Hour,
		OnState: states.on})
	rdb := redis.NewClient(must(redis.ParseURL(srv.url())))
	defer rdb.Close()
	// The first heartbeat is a script too, run by Run's goroutine: counted
	// among the blocked calls' scripts when it came late (1 CI run in 3).
	waitFor(t, 5*time.Second, "OnState(true) for the first heartbeat", func() bool { return states.ups.Load() == 1 })
	rule := qpsRule(5, config.ThresholdGlobal)
	rule.StatIntervalMs = 40 * 60 * 1000 // 40 minutes: no pass leaves during the test
	for i := range 5 {
		if ok, err := s.Acquire(rule, "", 1); !ok || err != nil {
			t.Fatalf("call %d = %v, %v; want a pass", i, ok, err)
		}
	}
	before := evalCalls(t, rdb)
	for i := range 100 {
		if ok, err := s.Acquire(rule, "", 1); ok || err != nil {
			t.Fatalf("call %d over the count = %v, %v; want a block", i, ok, err)
		}
	}
	asked := evalCalls(t, rdb) - before
	t.Logf("100 calls on a full window: %d reached Redis", asked)
	if asked > 1 {
		t.Errorf("%d of 100 blocked calls reached Redis, want 1: the window cannot free a token before its oldest pass leaves", asked)
	}
	if a := testing.AllocsPerRun(100, func() { s.Acquire(rule, "", 1) }); a != 0 {
		t.Errorf("a call answered from the block cache allocates %v times", a)
	}
	// Another origin is another window.
	if ok, err := s.Acquire(rule, "other", 1); !ok || err != nil {
		t.Errorf("another origin = %v, %v; want a pass", ok, err)
	}
}
