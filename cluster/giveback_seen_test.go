package cluster_test

import (
	"context"
	"testing"
	"time"

	"sluice/cluster"
	"sluice/config"
)

// TestGiveBackSeenByAnotherGateway: a calendar quota's pass given back on
// one gateway (a later rule refused the call, a client left a queue) makes
// room in Redis at once, and another gateway that had noted the
// value refused lets it in again within a second. The refusal was noted
// until the period's reset: an audit measured a day's quota
// refused on the second gateway for the rest of the day (Retry-After
// 35,680 s) while Redis held a free place and the first gateway passed it.
// (A rolling window's returned tokens reach Redis with the returning
// gateway's next call on the window, as docs/cluster.md says.)
func TestGiveBackSeenByAnotherGateway(t *testing.T) {
	t.Run("a day's quota", func(t *testing.T) {
		srv := startPrivateRedis(t)
		clock := new(wallClock)
		day := time.Now().Add(48 * time.Hour).UTC().Truncate(24 * time.Hour)
		clock.set(day.Add(9 * time.Hour))
		opts := cluster.Options{URL: srv.url(), Namespace: "seen", Timeout: 5 * time.Second, Heartbeat: time.Hour}
		a, b := newService(t, opts), newService(t, opts)
		a.SetWallClock(clock.now)
		b.SetWallClock(clock.now)
		r := quotaRule(config.WindowDay, "UTC") // count 3, no countOn
		var stamp int64
		for i := range 3 {
			ok, _, _, _, st, err := a.AcquireQuotaStamp(r, r.Count, "k", 1)
			if err != nil || !ok || st == 0 {
				t.Fatalf("call %d: ok %v stamp %d %v", i, ok, st, err)
			}
			stamp = st
		}
		if ok, _, _, _, _, _ := b.AcquireQuotaStamp(r, r.Count, "k", 1); ok {
			t.Fatal("a fourth call passed a full day on gateway b")
		}
		a.GiveBackQuota(r, r.Count, "k", 1, stamp) // a later rule refused a's third call
		clock.add(time.Second)
		ok, left, _, _, _, err := b.AcquireQuotaStamp(r, r.Count, "k", 1)
		if err != nil || !ok || left != 0 {
			t.Fatalf("a second after a's give-back, gateway b: ok %v, left %d, %v; want the freed place", ok, left, err)
		}
	})
}

// TestQuotaGiveBackWhileRedisFails: a countOn failure call let in while
// Redis answered holds its place in the day; answered with a success while
// Redis fails, its give-back is kept and sent once Redis answers again, so
// the key has its 3 guesses back. It was dropped: the success stayed
// charged as a failure for the rest of the day.
func TestQuotaGiveBackWhileRedisFails(t *testing.T) {
	srv, s, r := failureQuotaOnPrivateRedis(t, "returns")
	ok, _, _, _, stamp, err := s.AcquireQuotaStamp(r, r.Count, "k", 1)
	if err != nil || !ok || stamp == 0 {
		t.Fatalf("the call: ok %v stamp %d %v", ok, stamp, err)
	}
	srv.pause()
	waitFor(t, 5*time.Second, "the breaker open", func() bool { return !s.Up() })
	s.GiveBackQuota(r, r.Count, "k", 1, stamp) // its answer: a success
	srv.resume()
	waitFor(t, 5*time.Second, "Redis up again", s.Up)
	waitFor(t, 3*time.Second, "the success given back: 3 left", func() bool {
		left, _, err := s.PeekQuota(context.Background(), r, r.Count, "k")
		return err == nil && left == 3
	})
}

// TestQuotaGiveBackTimedOutIsNotSentTwice: a give-back whose round trip
// timed out may still have reached Redis (it runs it once it can): it is
// not kept to be sent again, which gave the place back twice, a guess more
// than the count (3 taken, 1 given back: 2 left where 1 is right).
func TestQuotaGiveBackTimedOutIsNotSentTwice(t *testing.T) {
	srv, s, r := failureQuotaOnPrivateRedis(t, "twice")
	var stamp int64
	for i := range 3 {
		ok, _, _, _, st, err := s.AcquireQuotaStamp(r, r.Count, "k", 1)
		if err != nil || !ok {
			t.Fatalf("call %d: ok %v %v", i, ok, err)
		}
		stamp = st
	}
	srv.pause()
	s.GiveBackQuota(r, r.Count, "k", 1, stamp) // times out, or finds the breaker open
	srv.resume()
	waitFor(t, 5*time.Second, "Redis up", s.Up)
	time.Sleep(500 * time.Millisecond) // Run's sends, if any, are done
	if left, _, err := s.PeekQuota(context.Background(), r, r.Count, "k"); err != nil || left != 1 {
		t.Fatalf("3 taken, 1 given back across a stall: %d left (%v), want 1", left, err)
	}
}

// failureQuotaOnPrivateRedis is a gateway on a Redis of the test's own
// (which it can stop), with a 100 ms timeout and heartbeat, at 09:00 of a
// day two days ahead, and a countOn failure day quota of 3.
func failureQuotaOnPrivateRedis(t *testing.T, ns string) (*privateRedis, *cluster.Service, *config.ParamRule) {
	t.Helper()
	srv := startPrivateRedis(t)
	clock := new(wallClock)
	day := time.Now().Add(48 * time.Hour).UTC().Truncate(24 * time.Hour)
	clock.set(day.Add(9 * time.Hour))
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: ns, Timeout: 100 * time.Millisecond, Heartbeat: 100 * time.Millisecond})
	s.SetWallClock(clock.now)
	r := quotaRule(config.WindowDay, "UTC")
	r.CountOn, r.FailureStatuses = config.CountOnFailure, []string{"401"}
	return srv, s, r
}
