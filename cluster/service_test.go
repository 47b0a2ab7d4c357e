package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
)

func TestNewRejectsBadOptions(t *testing.T) {
	for _, url := range []string{"", "http://nope", "redis://127.0.0.1:6379/notadb"} {
		if s, err := cluster.New(cluster.Options{URL: url}); err == nil {
			s.Close()
			t.Errorf("New(URL %q) = nil error, want one", url)
		}
	}
}

func TestAcquireWithoutDecision(t *testing.T) {
	// A port with nothing behind it: Redis "down" from the start.
	var states stateLog
	s, err := cluster.New(cluster.Options{URL: "redis://127.0.0.1:1/0", Timeout: 50 * time.Millisecond, OnState: states.on})
	if err != nil {
		t.Fatal(err)
	}
	rule := qpsRule(10, config.ThresholdGlobal)

	conc := *rule
	conc.Grade = config.GradeConcurrency
	if _, err := s.Acquire(&conc, "", 1); !errors.Is(err, cluster.ErrUnsupported) {
		t.Errorf("concurrency rule: err = %v, want ErrUnsupported", err)
	}
	for i := range 5 {
		ok, err := s.Acquire(rule, "", 1)
		if err == nil || ok {
			t.Fatalf("call %d with redis down = %v, %v; want no decision", i, ok, err)
		}
	}
	if s.Up() {
		t.Error("Up() after repeated failures = true")
	}
	if _, err := s.Acquire(rule, "", 1); !errors.Is(err, cluster.ErrUnavailable) {
		t.Errorf("breaker open: err = %v, want ErrUnavailable", err)
	}
	if d, u := states.downs.Load(), states.ups.Load(); d != 1 || u != 0 {
		t.Errorf("OnState calls: %d down, %d up; want the one down", d, u)
	}
	s.Close()
	if _, err := s.Acquire(rule, "", 1); !errors.Is(err, cluster.ErrClosed) {
		t.Errorf("after Close: err = %v, want ErrClosed", err)
	}
}

func TestWindowCountsExactly(t *testing.T) {
	url := redisURL(t)
	s := newService(t, cluster.Options{URL: url, Namespace: namespace(t), Timeout: time.Second})
	rule := qpsRule(10, config.ThresholdGlobal)
	rule.StatIntervalMs = 60000 // a minute: no pass expires during the test

	passes := func(r *config.FlowRule, key string, n int64, calls int) int {
		p := 0
		for range calls {
			ok, err := s.Acquire(r, key, n)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				p++
			}
		}
		return p
	}
	if got := passes(rule, "", 1, 25); got != 10 {
		t.Errorf("count 10: %d of 25 calls passed, want 10", got)
	}
	if got := passes(rule, "app-a", 4, 5); got != 2 {
		t.Errorf("count 10, 4 tokens a call: %d passed, want 2", got)
	}
	if got := passes(rule, "app-b", 1, 12); got != 10 {
		t.Errorf("another origin has its own window: %d passed, want 10", got)
	}
	moved := *rule
	moved.Line = 99
	moved.DryRun = true
	if got := passes(&moved, "", 1, 3); got != 0 {
		t.Errorf("same rule at another line shares the window: %d passed, want 0", got)
	}
	changed := *rule
	changed.Count = 3
	if got := passes(&changed, "", 1, 5); got != 3 {
		t.Errorf("a changed count is a new rule with a new window: %d passed, want 3", got)
	}
	frac := *rule
	frac.Count = 2.5
	if got := passes(&frac, "", 1, 5); got != 2 {
		t.Errorf("count 2.5: %d passed, want 2", got)
	}
}

func TestConcurrentCallsShareTheCount(t *testing.T) {
	url := redisURL(t)
	s := newService(t, cluster.Options{URL: url, Namespace: namespace(t), Timeout: time.Second})
	rule := qpsRule(100, config.ThresholdGlobal)
	rule.StatIntervalMs = 60000
	results := make(chan bool, 400)
	errs := make(chan error, 400)
	for g := range 8 {
		go func() {
			for range 50 {
				ok, err := s.Acquire(rule, fmt.Sprint("k", g%2), 1)
				if err != nil {
					errs <- err
				}
				results <- ok
			}
		}()
	}
	passed := 0
	for range 400 {
		if <-results {
			passed++
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if passed != 200 { // two keys, 100 each
		t.Errorf("%d of 400 concurrent calls over two keys passed, want 200", passed)
	}
}

func TestKeysExpire(t *testing.T) {
	url := redisURL(t)
	ns := namespace(t)
	s := newService(t, cluster.Options{URL: url, Namespace: ns, Timeout: time.Second})
	for _, ms := range []int64{1000, 60000} {
		rule := qpsRule(10, config.ThresholdAvgLocal)
		rule.StatIntervalMs = ms
		if ok, err := s.Acquire(rule, "origin-a", 1); !ok || err != nil {
			t.Fatalf("Acquire = %v, %v", ok, err)
		}
	}
	rdb := redis.NewClient(must(redis.ParseURL(url)))
	defer rdb.Close()
	ctx := context.Background()
	// The gateway set is written by Run's first heartbeat, which races the
	// Acquires above: wait for it (bounded) before counting keys.
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, err := rdb.Exists(ctx, "{"+ns+"}:gw").Result(); err == nil && n == 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no heartbeat wrote the gateway set within 3 s (err %v)", err)
		}
	}
	keys, err := rdb.Keys(ctx, "{"+ns+"[}:]*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 { // two windows and the gateway set
		t.Fatalf("keys in the namespace: %q, want two windows and the gateway set", keys)
	}
	for _, k := range keys {
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		// a window lives one interval after its newest pass (a minute); the gateway set 2 x expiry (6s)
		if ttl <= 0 || ttl > 60*time.Second+10*time.Millisecond {
			t.Errorf("key %s has TTL %v, want it to expire soon after its window", k, ttl)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestCloseWhileCallsAreInFlight(t *testing.T) {
	url := redisURL(t)
	s, err := cluster.New(cluster.Options{URL: url, Namespace: namespace(t), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rule := qpsRule(1e9, config.ThresholdGlobal)
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				_, err := s.Acquire(rule, fmt.Sprint(g), 1)
				if errors.Is(err, cluster.ErrClosed) {
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("an Acquire caller is still running 5s after Close")
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// ForgetParam empties a value's window for the whole namespace: a value
// refused (and remembered as refused) passes again at once on this gateway,
// and within a heartbeat on another that had noted it refused too; other
// values and the item's window keep theirs.
func TestForgetParam(t *testing.T) {
	url := redisURL(t)
	ns := namespace(t)
	const beat = 100 * time.Millisecond
	a := newService(t, cluster.Options{URL: url, Namespace: ns, Timeout: time.Second, Heartbeat: beat})
	b := newService(t, cluster.Options{URL: url, Namespace: ns, Timeout: time.Second, Heartbeat: beat})
	rule := paramRule(2, 600, config.ThresholdGlobal)
	passes := func(s *cluster.Service, count float64, value string, calls int) int {
		p := 0
		for range calls {
			ok, _, err := s.AcquireParam(rule, count, value, 1)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				p++
			}
		}
		return p
	}
	passes(a, 2, "locked", 3)
	passes(a, 2, "other", 3)
	passes(a, 5, "locked", 6) // the same value under an item's count: its own window
	if got := passes(a, 2, "locked", 1) + passes(b, 2, "locked", 1); got != 0 {
		t.Fatal("not refused before ForgetParam")
	}
	if err := a.ForgetParam(context.Background(), rule, 2, "locked"); err != nil {
		t.Fatal(err)
	}
	if got := passes(a, 2, "locked", 1); got != 1 {
		t.Fatal("the gateway that lifted the value still refuses it")
	}
	// b noted the window full (its block cache); its next heartbeat reads
	// the lift. A 5 s deadline: heartbeats are 100 ms apart.
	start := time.Now()
	waitFor(t, 5*time.Second, "the other gateway to pass the lifted value", func() bool { return passes(b, 2, "locked", 1) == 1 })
	t.Logf("the other gateway passed the lifted value %v after the lift", time.Since(start).Round(time.Millisecond))
	if got := passes(a, 2, "locked", 1) + passes(b, 2, "locked", 1); got != 0 {
		t.Errorf("after the lift and two passes %d more passed; want 0, the count is 2", got)
	}
	if got := passes(a, 2, "other", 1) + passes(a, 5, "locked", 1); got != 0 {
		t.Errorf("ForgetParam emptied another window too (%d passed)", got)
	}
}

// A gateway that noted a window full before its first heartbeat (Run
// started late, or its first beat was slow on a busy host) still passes a
// value lifted meanwhile within a heartbeat: its first reading of the lift
// counter cannot tell whether a lift came after the note, so it forgets
// what it noted.
func TestForgetParamBeforeFirstHeartbeat(t *testing.T) {
	url := redisURL(t)
	ns := namespace(t)
	const beat = 100 * time.Millisecond
	a := newService(t, cluster.Options{URL: url, Namespace: ns, Timeout: time.Second, Heartbeat: beat})
	var states stateLog
	b, err := cluster.New(cluster.Options{URL: url, Namespace: ns, Timeout: time.Second, Heartbeat: beat, OnState: states.on})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rule := paramRule(2, 600, config.ThresholdGlobal)
	for range 3 {
		if _, _, err := b.AcquireParam(rule, 2, "locked", 1); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _, _ := b.AcquireParam(rule, 2, "locked", 1); ok {
		t.Fatal("not refused before ForgetParam")
	}
	if err := a.ForgetParam(context.Background(), rule, 2, "locked"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// Wait on b's first heartbeat (its first state), not on a clock.
	waitFor(t, 5*time.Second, "the first heartbeat of the other gateway", func() bool { return states.ups.Load() == 1 })
	if ok, _, err := b.AcquireParam(rule, 2, "locked", 1); !ok || err != nil {
		t.Fatalf("after its first heartbeat the other gateway still refuses the lifted value (%v)", err)
	}
}

// ReadParam reads a value's window without taking a token: the tokens in
// it and until the oldest leaves; reading it any number of times leaves
// the value its count.
func TestReadParam(t *testing.T) {
	s := newService(t, cluster.Options{URL: redisURL(t), Namespace: namespace(t), Timeout: time.Second})
	rule := paramRule(3, 600, config.ThresholdGlobal)
	ctx := context.Background()
	for range 50 {
		if used, wait, err := s.ReadParam(ctx, rule, 3, "fresh"); err != nil || used != 0 || wait != 0 {
			t.Fatalf("an untouched value: %v tokens, %v, %v", used, wait, err)
		}
	}
	for range 2 {
		if ok, _, err := s.AcquireParam(rule, 3, "fresh", 1); !ok || err != nil {
			t.Fatalf("after 50 reads a call was refused: %v", err)
		}
	}
	used, wait, err := s.ReadParam(ctx, rule, 3, "fresh")
	if err != nil || used != 2 || wait <= 590*time.Second || wait > 600*time.Second {
		t.Fatalf("after 2 passes: %v tokens, the oldest leaves in %v (%v); want 2, about 600 s", used, wait, err)
	}
	if ok, _, _ := s.AcquireParam(rule, 3, "fresh", 1); !ok {
		t.Fatal("the third call was refused: a read took a token")
	}
}

// TestReadParamAfterGiveBack: a pass another rule refused is given back
// with the value's next call to Redis; until then the value reads as it
// is, not as locked out (SPEC §5: who is being limited right now). The
// admin API read it as 0 tokens left for a minute while the next call
// passed.
func TestReadParamAfterGiveBack(t *testing.T) {
	s := newService(t, cluster.Options{URL: redisURL(t), Namespace: namespace(t), Timeout: time.Second})
	rule := paramRule(1, 60, config.ThresholdGlobal)
	ctx := context.Background()
	ok, _, _, _, stamp, err := s.AcquireParamStamp(rule, 1, "d", 1, false)
	if !ok || err != nil {
		t.Fatalf("the first call: %v %v", ok, err)
	}
	s.GiveBackParam(rule, 1, "d", 1, stamp) // a later check refused it
	if used, wait, err := s.ReadParam(ctx, rule, 1, "d"); err != nil || used != 0 || wait != 0 {
		t.Errorf("after the pass was given back: %v tokens used, the next in %v (%v); want 0, 0", used, wait, err)
	}
	if ok, _, err := s.AcquireParam(rule, 1, "d", 1); !ok || err != nil {
		t.Fatalf("the next call was refused: %v", err)
	}
	if used, wait, err := s.ReadParam(ctx, rule, 1, "d"); err != nil || used != 1 || wait < 55*time.Second {
		t.Errorf("after the next call passed: %v tokens used, the next in %v (%v); want 1, about 60 s", used, wait, err)
	}
}
