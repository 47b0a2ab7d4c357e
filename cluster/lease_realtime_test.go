package cluster_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
)

// A hot window far from its count is decided mostly from leased tokens: one
// round trip per lease (up to statIntervalMs/40) instead of one per batch of calls.
func TestLeasingSavesRoundTripsFarFromTheCount(t *testing.T) {
	srv := startPrivateRedis(t)
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: namespace(t), Timeout: time.Second, Heartbeat: time.Hour})
	rdb := redis.NewClient(must(redis.ParseURL(srv.url())))
	defer rdb.Close()
	rule := qpsRule(1e9, config.ThresholdGlobal)
	before := evalCalls(t, rdb)
	const calls = 3000
	start := time.Now()
	for i := range calls {
		if ok, err := s.Acquire(rule, "", 1); !ok || err != nil {
			t.Fatalf("call %d = %v, %v; want a pass", i, ok, err)
		}
	}
	took := time.Since(start)
	asked := evalCalls(t, rdb) - before
	t.Logf("%d sequential calls in %v: %d reached Redis", calls, took, asked)
	if asked > calls/10 {
		t.Errorf("%d of %d calls reached Redis, want at most a tenth: leases should serve the rest", asked, calls)
	}
}

// Leases stop at half the count and every leased token is used by calls
// that keep coming, so the count stays exact.
func TestLeasingKeepsTheCountExact(t *testing.T) {
	url := redisURL(t)
	s := newService(t, cluster.Options{URL: url, Namespace: namespace(t), Timeout: time.Second})
	for _, count := range []float64{100, 1000, 7.5} {
		rule := qpsRule(count, config.ThresholdGlobal)
		rule.StatIntervalMs = 60000 // no pass leaves during the loop
		passed := 0
		for range 3 * int(count+1) {
			ok, err := s.Acquire(rule, "", 1)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				passed++
			}
		}
		if want := int(count); passed != want {
			t.Errorf("count %v: %d passed, want exactly %d", count, passed, want)
		}
	}
}

// A pass asked what it leaves reports the count less the passes so far,
// whether Redis decided it or a lease did: with one gateway and no pass
// leaving the window, a lease's pass says what the window had left when
// the lease was granted plus the lease's unused tokens, which is exact. A
// lease serves every caller of the window: the calls that ask for it here
// do not ask what is left (and are told nothing), and later calls that do
// ask are told all the same (1400 were told nothing when a lease request
// did not ask Redis). The calls come every 50 µs of the Service's clock,
// so every lease is used up on time however busy the machine (an expired
// lease's unused tokens stay counted until returned, and left would say
// less); most are served by leases.
func TestLeasedPassesSayWhatIsLeft(t *testing.T) {
	s, clock, rdb := privateSynthService(t)
	const count = 1e9
	rule := qpsRule(count, config.ThresholdGlobal)
	rule.StatIntervalMs = 60000 // no pass leaves during the loop
	before := evalCalls(t, rdb)
	const calls = 3000
	wrong := 0
	for i := range calls {
		clock.us.Store(int64(i) * 50)
		// The first calls, which ask for the lease, do not ask what
		// is left; half of those after it do.
		report := i >= 200 && i%2 == 0
		ok, _, left, reset, err := s.AcquireFlow(rule, "", 1, report)
		if !ok || err != nil {
			t.Fatalf("call %d = %v, %v; want a pass", i, ok, err)
		}
		// A group of tokens counts until its newest leaves, and a lease's
		// are stamped up to statIntervalMs/40 ahead.
		want := int64(count - i - 1)
		if !report {
			want = -1
		}
		if left != want || (report && (reset <= 0 || reset > time.Minute+time.Minute/40)) {
			if wrong++; wrong <= 5 {
				t.Errorf("pass %d (asked: %v): left %d, reset %v; want %d, and reset within 61.5 s", i, report, left, reset, want)
			}
		}
	}
	asked := evalCalls(t, rdb) - before
	t.Logf("%d calls, %d reached Redis, %d reported wrong", calls, asked, wrong)
	if asked > calls/10 {
		t.Errorf("%d of %d calls reached Redis, want at most a tenth: leases should serve the rest", asked, calls)
	}
}
