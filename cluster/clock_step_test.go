package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"sluice/cluster"
	"sluice/config"
	"sluice/internal/passcheck"
)

// TestWindowAfterRedisClockStepsBack: Redis's clock goes back (a failover
// to a replica whose clock is behind, an NTP step). Passes were stamped no
// earlier than the newest, so every pass made before the step counted until
// the clock caught up with it: a window at its limit refused every call for
// as long as the step (an hour back: an hour, Retry-After 59m58s). Now a
// pass made before the step counts from the step on for as long as it had
// left, never less (its real age is more): swept over counts (groups of
// slots past 1024 included), how the passes before the step were spread,
// and where in the interval the step falls, with an overload after it, no
// real interval holds more than the count, passes resume within one
// interval of the step, and the overload gets the whole count an interval.
func TestWindowAfterRedisClockStepsBack(t *testing.T) {
	const I = int64(time.Second / time.Microsecond)
	for _, count := range []int64{1, 5, 100, 2500} {
		for _, step := range []time.Duration{3 * time.Second, time.Hour} {
			for _, spread := range []float64{0, 0.5, 0.99} { // of the interval the passes before the step took
				for _, phase := range []float64{0.1, 0.5, 0.9} { // of the interval from the last pass to the step
					name := fmt.Sprintf("count %d, back %v, spread %v, phase %v", count, step, spread, phase)
					t.Run(name, func(t *testing.T) {
						checkClockStepBack(t, count, step.Microseconds(), I, spread, phase)
					})
				}
			}
		}
	}
}

// checkClockStepBack fills a window of count per interval I (µs) with
// passes spread over spread x I, steps Redis's clock back by back µs at
// phase x I after the last, then offers twice the count per interval for
// three intervals. Calls carry n tokens so that a large count takes few.
func checkClockStepBack(t *testing.T, count, back, I int64, spread, phase float64) {
	clock := new(synthClock)
	s := newService(t, cluster.Options{URL: redisURL(t), Namespace: namespace(t), Timeout: 5 * time.Second, Heartbeat: time.Hour})
	s.SetClock(clock.now)
	s.DisableLeases()
	rule := qpsRule(float64(count), config.ThresholdGlobal)
	n := max(1, count/250)
	var real []int64 // the instant of every token passed, on the real timeline (µs)
	offer := func(redisAt, realAt int64) bool {
		t.Helper()
		clock.us.Store(redisAt)
		ok, _, err := s.AcquireRetry(rule, "", n)
		if err != nil {
			t.Fatalf("at %dµs: %v", redisAt, err)
		}
		if ok {
			for range n {
				real = append(real, realAt)
			}
		}
		return ok
	}
	calls := count / n
	for i := range calls {
		at := int64(float64(i) * spread * float64(I) / float64(max(1, calls-1)))
		if !offer(at, at) {
			t.Fatalf("pass %d of %d before the step refused", i+1, calls)
		}
	}
	stepAt := int64(spread*float64(I)) + int64(phase*float64(I))
	before := len(real)
	passcheck.Offer(stepAt, stepAt+3*I, float64(I)/float64(2*calls), func(_ int64, at int64) bool {
		return offer(at-back, at)
	})
	if m := passcheck.MostInInterval(real, I); m > int(count) {
		t.Errorf("%d tokens passed within one real interval, count %d", m, count)
	}
	if len(real) == before || real[before] > stepAt+I {
		t.Fatalf("no pass within an interval of the step (%d after it)", len(real)-before)
	}
	last := 0
	for _, at := range real[before:] {
		if at >= stepAt+2*I {
			last++
		}
	}
	// Above 1024 a slot holds g tokens and the window may count g-1 that
	// left (cluster's doc): the whole count, less those, in calls of n.
	g := (count + 1023) / 1024
	if want := int((count - (g - 1)) / n * n); last < want {
		t.Errorf("the overload's last interval got %d tokens, want %d", last, want)
	}
}

// TestAvgLocalReadingAfterRedisClockStepsBack: an avgLocal window keeps
// the newest reading of the live gateways, by the Redis ms it was taken at.
// A reading from before a step back of Redis's clock stayed the newest
// until the clock caught up, so the window's limit ignored gateways that
// joined or left for as long as the step. A reading from the future is no
// longer the newest.
func TestAvgLocalReadingAfterRedisClockStepsBack(t *testing.T) {
	w := newScriptWindow(t)
	redisMs := time.Now().UnixMilli() // the test's Redis runs on this machine's clock
	w.live, w.liveAt = 1, redisMs+time.Hour.Milliseconds()
	for i, want := range []bool{true, true, false} {
		if got := w.callAvg(int64(i), 2, 1) == 0; got != want {
			t.Fatalf("call %d with one gateway of 2 a second: passed %v, want %v", i+1, got, want)
		}
	}
	w.live, w.liveAt = 3, redisMs // read after the clock went back an hour
	if w.callAvg(3, 2, 1) != 0 {
		t.Error("three gateways read after Redis's clock went back: the window kept the limit of one")
	}
}
