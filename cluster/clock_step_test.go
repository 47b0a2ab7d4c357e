package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"sluice/cluster"
	"sluice/config"
)

// TestWindowAfterRedisClockStepsBack: Redis's clock goes back (a failover
// to a replica whose clock is behind, an NTP step). Passes were stamped no
// earlier than the newest, so every pass made before the step counted until
// the clock caught up with it: a window at its limit refused every call for
// as long as the step (an hour back: an hour, Retry-After 59m58s), and a
// client at the limit's pace was refused for as long. Now a window waits at
// most one interval: a pass made before the step counts from the step on
// for as long as it had left, never less (its real age is more), so no
// interval holds more than the limit either.
func TestWindowAfterRedisClockStepsBack(t *testing.T) {
	for _, step := range []time.Duration{3 * time.Second, time.Hour, 30 * 24 * time.Hour} {
		t.Run(fmt.Sprint(step), func(t *testing.T) {
			clock := new(synthClock)
			s := newService(t, cluster.Options{URL: redisURL(t), Namespace: namespace(t), Timeout: 5 * time.Second, Heartbeat: time.Hour})
			s.SetClock(clock.now)
			s.DisableLeases()
			rule := qpsRule(5, config.ThresholdGlobal) // 5 a second
			at := func(us int64) (bool, time.Duration) {
				t.Helper()
				clock.us.Store(us)
				ok, retry, err := s.AcquireRetry(rule, "", 1)
				if err != nil {
					t.Fatalf("at %dµs: %v", us, err)
				}
				return ok, retry
			}
			// A full window, one pass every 100 ms.
			for i := range int64(5) {
				if ok, _ := at(i * 100_000); !ok {
					t.Fatalf("pass %d of 5 refused", i+1)
				}
			}
			// The clock steps back; 2 s of real time later the window is
			// asked again: counted from the step, it is full for at most
			// one interval.
			now := 400_000 - step.Microseconds() + 2_000_000
			ok, retry := at(now)
			if !ok && retry > time.Second {
				t.Fatalf("%v after a step back of %v: refused for %v, want at most the 1 s interval", 2*time.Second, step, retry)
			}
			if !ok {
				now += retry.Microseconds()
				if ok, retry = at(now); !ok {
					t.Fatalf("refused again after the %v it said (%v)", retry, retry)
				}
			}
			// Then a client at exactly the limit's pace is never refused,
			// and no interval holds more than 5.
			var passes []int64
			refused := 0
			for i := range int64(50) {
				us := now + 200_000*(i+1)
				if ok, _ := at(us); ok {
					passes = append(passes, us)
				} else {
					refused++
				}
			}
			if refused > 0 {
				t.Errorf("a client at 5 a second after the step: %d of 50 refused", refused)
			}
			for i := 5; i < len(passes); i++ {
				if passes[i]-passes[i-5] < 1_000_000 {
					t.Fatalf("6 passes within a second: %v", passes[i-5:i+1])
				}
			}
		})
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
