package cluster_test

// Cluster param windows (AcquireParam) as properties, against the real
// Redis on synthetic time, as window_property_test.go does for flow rules:
// each value has its own exact sliding window of count per durationSec.
// Those on synthetic time run in parallel, as there; the flood test, on real
// time, does not.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
)

func paramRule(count float64, durationSec int64, tt config.ThresholdType) *config.ParamRule {
	return &config.ParamRule{
		Resource: "orders", Param: config.Key{{Kind: config.SourceHeader, Name: "X-Key"}},
		Grade: config.GradeQPS, Count: count, DurationSec: durationSec,
		ControlBehavior: config.BehaviorReject, MaxTrackedValues: 1000, ClusterMode: true,
		ClusterConfig: config.ClusterConfig{ThresholdType: tt},
	}
}

// offerValueAt makes one call of n tokens for value at each instant (µs,
// ascending) and returns the passes and the number refused.
func offerValueAt(t *testing.T, s *cluster.Service, clock *synthClock, rule *config.ParamRule, count float64, value string, n int64, at []int64) (passes []pass, refused int) {
	t.Helper()
	for _, a := range at {
		clock.us.Store(a)
		ok, _, err := s.AcquireParam(rule, count, value, n)
		if err != nil {
			t.Fatalf("AcquireParam at %dµs: %v", a, err)
		}
		if ok {
			passes = append(passes, pass{a, n})
		} else {
			refused++
		}
	}
	return passes, refused
}

type paramCase struct {
	count       float64
	durationSec int64
	n           int64
}

func (c paramCase) String() string {
	return fmt.Sprintf("count=%g/duration=%ds/n=%d", c.count, c.durationSec, c.n)
}

// paramCases sweeps counts, durations and tokens per call; the largest
// counts at one second only, to bound the round trips.
func paramCases() []paramCase {
	var cs []paramCase
	for _, d := range []int64{1, 10, 60} {
		for _, count := range []float64{1, 2, 7, 100, 1500} {
			if count > 100 && d != 1 {
				continue
			}
			for _, n := range []int64{1, 3} {
				if n <= int64(count) {
					cs = append(cs, paramCase{count, d, n})
				}
			}
		}
	}
	return cs
}

// A value whose calls are at least durationSec/count apart is never
// refused, and no real durationSec holds more than count of its tokens,
// from any start phase.
func TestParamWindowPacedValueIsNeverRefused(t *testing.T) {
	t.Parallel()
	clock := new(synthClock)
	s := synthService(t, namespace(t), clock)
	for i, c := range paramCases() {
		t.Run(c.String(), func(t *testing.T) {
			iv := c.durationSec * 1e6
			calls := (int64(c.count) - groupSlack(c.count)) / c.n
			start := int64(i)*3600e6 + int64(i)*37_000%iv
			at := grid(start, iv, calls, 3)
			passes, refused := offerValueAt(t, s, clock, paramRule(c.count, c.durationSec, config.ThresholdGlobal), c.count, "paced"+t.Name(), c.n, at)
			if refused != 0 {
				t.Errorf("%d calls of %d tokens, %v apart: %d refused, want 0", len(at), c.n, time.Duration(iv/calls)*time.Microsecond, refused)
			}
			if m := maxInAnyWindow(passes, iv); m > int64(c.count) {
				t.Errorf("%d tokens in one real durationSec, count %g", m, c.count)
			}
		})
	}
}

// Under a steady overload a value passes exactly count per durationSec
// (whole calls), and no real durationSec holds more; another value of the
// same rule, and an item's value with its own count, are counted apart.
func TestParamWindowOverloadPassesExactlyCount(t *testing.T) {
	t.Parallel()
	clock := new(synthClock)
	s := synthService(t, namespace(t), clock)
	const intervals = 4
	for i, c := range paramCases() {
		for _, factor := range []float64{1.5, 3} {
			t.Run(fmt.Sprintf("%v/x%g", c, factor), func(t *testing.T) {
				iv := c.durationSec * 1e6
				fits := int64(c.count) / c.n
				calls := int64(factor*float64(fits) + 0.999)
				start := int64(i)*3600e6 + int64(i)*41_000%iv
				rule := paramRule(c.count, c.durationSec, config.ThresholdGlobal)
				hot, quiet := "hot"+t.Name(), "quiet"+t.Name()
				// the hot value and a quiet one, at one call per durationSec,
				// interleaved: the quiet one is never refused
				at := grid(start, iv, calls, intervals)
				var passes []pass
				quietRefused := 0
				for k, a := range at {
					p, _ := offerValueAt(t, s, clock, rule, c.count, hot, c.n, []int64{a})
					passes = append(passes, p...)
					if int64(k)%calls == 0 {
						_, r := offerValueAt(t, s, clock, rule, c.count, quiet, c.n, []int64{a})
						quietRefused += r
					}
				}
				got := perInterval(passes, start, iv, intervals)
				want := fits * c.n
				low := want
				if c.count > cluster.RingSlots {
					low = int64(float64(want) * 0.999)
				}
				for k, g := range got {
					if g < low || g > want {
						t.Errorf("durationSec %d passed %d tokens, want %d (at least %d); per interval %v", k, g, want, low, got)
						break
					}
				}
				if m := maxInAnyWindow(passes, iv); m > int64(c.count) {
					t.Errorf("%d tokens in one real durationSec, count %g", m, c.count)
				}
				if quietRefused != 0 {
					t.Errorf("a quiet value of the same rule was refused %d times beside the hot one", quietRefused)
				}
			})
		}
	}
}

// One value spread over two gateways passes count per durationSec in
// total (global), and count x 2 with avgLocal, exactly, under overload.
func TestParamWindowTwoGatewaysShareOneValue(t *testing.T) {
	t.Parallel()
	srv := startPrivateRedis(t)
	clock := new(synthClock)
	ns := namespace(t)
	var svcs [2]*cluster.Service
	for i := range svcs {
		svcs[i] = newService(t, cluster.Options{URL: srv.url(), Namespace: ns, Timeout: 5 * time.Second, Heartbeat: 100 * time.Millisecond})
		svcs[i].SetClock(clock.now)
	}
	// Both gateways must see each other for avgLocal, and for the fallback
	// share (Gateways).
	waitFor(t, 5*time.Second, "both gateways to count two live gateways", func() bool {
		return svcs[0].Gateways() == 2 && svcs[1].Gateways() == 2
	})
	for _, tc := range []struct {
		tt    config.ThresholdType
		count int64
		want  int64
	}{{config.ThresholdGlobal, 10, 10}, {config.ThresholdGlobal, 100, 100}, {config.ThresholdAvgLocal, 10, 20}} {
		rule := paramRule(float64(tc.count), 1, tc.tt)
		const iv = int64(1e6)
		calls := 3 * tc.want / 2 // per gateway per interval: 3x the total together
		var passes []pass
		for _, a := range grid(0, iv, calls, 4) {
			for i, s := range svcs {
				p, _ := offerValueAt(t, s, clock, rule, float64(tc.count), "k-"+string(tc.tt), 1, []int64{a + int64(i)*iv/calls/2})
				passes = append(passes, p...)
			}
		}
		got := perInterval(passes, 0, iv, 4)
		t.Logf("%s count %d: one value over two gateways passed per second %v", tc.tt, tc.count, got)
		for k, g := range got {
			if g != tc.want {
				t.Errorf("%s count %d: second %d passed %d, want %d", tc.tt, tc.count, k, g, tc.want)
			}
		}
		if m := maxInAnyWindow(passes, iv); m > tc.want {
			t.Errorf("%s count %d: %d in one real second", tc.tt, tc.count, m)
		}
	}
	// Gateways is the last reading, kept while Redis is down: what a global
	// rule's local fallback divides its count by.
	srv.kill()
	waitFor(t, 5*time.Second, "the breaker to open", func() bool { return !svcs[0].Up() })
	if g := svcs[0].Gateways(); g != 2 {
		t.Errorf("with Redis down, Gateways = %d, want the last reading 2", g)
	}
}

// keysService is a service on a private Redis, in namespace ns, on
// synthetic time, and a client to read that Redis's keys.
func keysService(t *testing.T, ns string) (*cluster.Service, *redis.Client, *synthClock) {
	t.Helper()
	srv := startPrivateRedis(t)
	rdb := redis.NewClient(must(redis.ParseURL(srv.url())))
	t.Cleanup(func() { rdb.Close() })
	clock := new(synthClock)
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: ns, Timeout: 5 * time.Second, Heartbeat: time.Hour})
	s.SetClock(clock.now)
	return s, rdb, clock
}

// Keys: each value's window has its own hash tag (a rule's values spread
// over a Redis Cluster's slots), and a long value is keyed by a digest, so
// no key is longer than about 200 bytes whatever the request sent; values
// that share their first bytes still count apart.
func TestParamWindowKeys(t *testing.T) {
	t.Parallel()
	s, rdb, clock := keysService(t, "keys")
	rule := paramRule(1, 1, config.ThresholdGlobal)
	for _, v := range append([]string{"a", "b"}, longKeyValues("x", 5000)...) {
		if _, r := offerValueAt(t, s, clock, rule, 1, v, 1, []int64{0}); r != 0 {
			t.Errorf("first call of value %.10q… refused", v)
		}
		if _, r := offerValueAt(t, s, clock, rule, 1, v, 1, []int64{1}); r != 1 {
			t.Errorf("second call of value %.10q… in the same second passed", v)
		}
	}
	for _, k := range shortKeys(t, rdb, "{keys:p:*", 5) {
		if !strings.HasSuffix(k, "}") || strings.Count(k, "{") != 1 {
			t.Errorf("key %.60q… is not one hash tag of its own", k)
		}
	}
}

// Keys of a flow rule's origins: a long origin (an origin header may be
// 64 KB) is keyed by a digest as a long param value is, so no key is longer
// than about 200 bytes; origins that share their first bytes, and one
// spelled as a digest, still count apart. A 60 KB origin made a 60 KB key
// (the cluster audit of 2026-12-07).
func TestFlowOriginKeys(t *testing.T) {
	t.Parallel()
	s, rdb, clock := keysService(t, "okeys")
	rule := qpsRule(1, config.ThresholdGlobal)
	rule.LimitApp = config.LimitAppOther
	for i, o := range append([]string{"a"}, longKeyValues("o", 60000)...) {
		at := int64(i) * 10
		if _, r := offerAt(t, s, clock, rule, o, 1, []int64{at}); r != 0 {
			t.Errorf("first call of origin %.10q… refused", o)
		}
		if _, r := offerAt(t, s, clock, rule, o, 1, []int64{at + 1}); r != 1 {
			t.Errorf("second call of origin %.10q… in the same second passed", o)
		}
	}
	shortKeys(t, rdb, "{okeys:w:*", 4)
}

// longKeyValues are values a window's key must keep apart: two of n bytes
// of fill that share their first bytes, and a short one spelled as the
// first one's digest form (its first 48 bytes, '#', its SHA-256 in hex).
func longKeyValues(fill string, n int) []string {
	long := strings.Repeat(fill, n)
	sum := sha256.Sum256([]byte(long + "1"))
	return []string{long + "1", long + "2", long[:48] + "#" + hex.EncodeToString(sum[:])}
}

// shortKeys returns the keys matching pattern, failing unless there are
// want of them (one a value or origin) and each is at most 200 bytes.
func shortKeys(t *testing.T, rdb *redis.Client, pattern string, want int) []string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != want {
		t.Fatalf("%d keys match %s, want %d (one a value)", len(keys), pattern, want)
	}
	for _, k := range keys {
		if len(k) > 200 {
			t.Errorf("key of %d bytes: %.60q…", len(k), k)
		}
	}
	return keys
}

// Redis memory under a flood of distinct values: each value's window is a
// string of 80 + 8 x min(count, 1024) bytes that expires durationSec after
// its newest pass, so the keys alive are the values seen in the last
// durationSec (+ the PEXPIRE's 1ms rounding; 3 s here, so that the whole
// flood is alive at once), and memory returns to where
// it was once the flood stops. Real time, on a Redis of the test's own, and
// in parallel with the other tests: what it measures is that Redis's memory,
// and a flood slowed by a busy machine is allowed for below.
func TestParamWindowsFloodMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	t.Parallel()
	srv := startPrivateRedis(t)
	rdb := redis.NewClient(must(redis.ParseURL(srv.url())))
	defer rdb.Close()
	ctx := context.Background()
	var states stateLog
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: "flood", Timeout: time.Second, Heartbeat: time.Hour, OnState: states.on})
	// The first heartbeat writes the gateway set, a key that stays: when it
	// came after the count before the flood, the count never came back
	// (a CI run on a busy machine).
	waitFor(t, 5*time.Second, "OnState(true) for the first heartbeat", func() bool { return states.ups.Load() == 1 })
	used := func() int64 {
		info, err := rdb.Info(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("no used_memory in INFO memory")
		return 0
	}
	for _, count := range []float64{10, 100} {
		const values = 20000
		rule := paramRule(count, 3, config.ThresholdGlobal)
		before, keys0 := used(), rdb.DBSize(ctx).Val()
		start := time.Now()
		// 16 callers at once, as a gateway's requests come: the batcher
		// sends their calls in one script; one caller at a time took 8.9 s
		// with one core busy, past the values' 3 s.
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < values; i += 16 {
					if _, _, err := s.AcquireParam(rule, count, "v"+strconv.Itoa(i), 1); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		took := time.Since(start)
		peak, keys := used(), rdb.DBSize(ctx).Val()
		one, _ := rdb.MemoryUsage(ctx, "{flood:p:"+strings.Split(mustKey(t, rdb), ":")[2]+":v"+strconv.Itoa(values-1)+"}").Result()
		wait := waitFor(t, 30*time.Second, "the flood's keys to expire", func() bool { return rdb.DBSize(ctx).Val() == keys0 })
		after := used()
		per := float64(peak-before) / float64(max(keys-keys0, 1))
		t.Logf("count %g: %d distinct values in %v: %d keys, used_memory %d -> %d (+%.0f B a value; MEMORY USAGE of one: %d B; window string %d B); all expired %v after the flood; used_memory then %d",
			count, values, took.Round(time.Millisecond), keys-keys0, before, peak, per, one, cluster.HeaderBytes+8*int(count), wait.Round(time.Millisecond), after)
		// a busy machine may take longer than durationSec for the flood:
		// the first values have expired then, and about values x 3s/took
		// are alive
		alive := float64(values) * min(1, 3/took.Seconds())
		if keys-keys0 > values || float64(keys-keys0) < alive/2 {
			t.Errorf("count %g: %d keys for %d values sent in %v (about %.0f alive)", count, keys-keys0, values, took, alive)
		}
		if limit := float64(cluster.HeaderBytes+8*int(count)) + 256; per > limit {
			t.Errorf("count %g: %.0f bytes a value, want at most %.0f (the window string and a key's overhead)", count, per, limit)
		}
		if after > before+(peak-before)/10 {
			t.Errorf("count %g: used_memory %d after expiry, %d before the flood", count, after, before)
		}
	}
}

// mustKey returns one key of the flood test's namespace.
func mustKey(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	keys, _, err := rdb.Scan(context.Background(), 0, "{flood:p:*", 1000).Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("no flood key: %v", err)
	}
	return keys[0]
}
