package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
)

// TestQuotaGiveBacksKeptDoNotHoldUpHeartbeats: give-backs kept while Redis
// failed are sent once it answers, one round trip each; on a slow Redis a
// backlog of them took Run seconds, with no heartbeat meanwhile, so the
// gateway dropped out of the live set (the others' avgLocal share grew:
// the fleet passed more than the count). The heartbeat keeps its cadence
// while they drain, and every one of them is sent.
func TestQuotaGiveBacksKeptDoNotHoldUpHeartbeats(t *testing.T) {
	const (
		beat = 250 * time.Millisecond
		lag  = 20 * time.Millisecond // each round trip once Redis answers again
		n    = 150                   // give-backs kept: 3 s of round trips one after another
	)
	srv := startPrivateRedis(t)
	px := startCutProxy(t, srv)
	clock := new(wallClock)
	day := time.Now().Add(48 * time.Hour).UTC().Truncate(24 * time.Hour)
	clock.set(day.Add(9 * time.Hour))
	// A timeout well above the lag: a beat slowed by a busy machine is
	// late, not lost.
	s := newService(t, cluster.Options{URL: px.url(), Namespace: "slow", Timeout: 400 * time.Millisecond, Heartbeat: beat})
	direct := newService(t, cluster.Options{URL: srv.url(), Namespace: "slow", Timeout: 5 * time.Second, Heartbeat: time.Hour})
	s.SetWallClock(clock.now)
	direct.SetWallClock(clock.now)
	r := quotaRule(config.WindowDay, "UTC")
	r.Count = n
	var stamp int64
	for i := range n {
		ok, _, _, _, st, err := direct.AcquireQuotaStamp(r, r.Count, "k", 1)
		if err != nil || !ok {
			t.Fatalf("call %d: ok %v %v", i, ok, err)
		}
		stamp = st
	}
	px.cut(true)
	waitFor(t, 5*time.Second, "the breaker open", func() bool { return !s.Up() })
	for range n {
		s.GiveBackQuota(r, r.Count, "k", 1, stamp)
	}
	if kept := s.QuotaReturnsKept(); kept != n {
		t.Fatalf("%d give-backs made while the breaker is open: %d kept", n, kept)
	}
	px.slow(lag)
	px.cut(false)
	waitFor(t, 10*time.Second, "Redis up", s.Up)

	// The heartbeat's age on Redis's clock: Run beats every period, late by
	// a round trip at most (the beat's own, and a give-back's in flight).
	opt, _ := redis.ParseURL(srv.url())
	c := redis.NewClient(opt)
	defer c.Close()
	start := time.Now()
	age := func() time.Duration {
		t.Helper()
		var at *redis.FloatCmd
		var now *redis.TimeCmd
		_, err := c.Pipelined(context.Background(), func(p redis.Pipeliner) error {
			at, now = p.ZScore(context.Background(), "{slow}:gw", s.GatewayID()), p.Time(context.Background())
			return nil
		})
		if errors.Is(err, redis.Nil) {
			t.Fatalf("%v after Redis answered again: the gateway is not in the live set", time.Since(start).Round(time.Millisecond))
		} else if err != nil {
			t.Fatalf("the gateway's heartbeat: %v", err)
		}
		return now.Val().Sub(time.UnixMilli(int64(at.Val())))
	}
	var oldest time.Duration
	for quotaLeft(t, direct, r, "k") != n {
		if a := age(); a > 2*beat {
			t.Fatalf("%v after Redis answered again, with %d of %d give-backs sent: the heartbeat is %v old, want %v at most",
				time.Since(start).Round(time.Millisecond), quotaLeft(t, direct, r, "k"), n, a, 2*beat)
		} else {
			oldest = max(oldest, a)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("30s after Redis answered again, %d of %d give-backs sent", quotaLeft(t, direct, r, "k"), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if kept := s.QuotaReturnsKept(); kept != 0 {
		t.Errorf("every give-back taken: %d kept", kept)
	}
	t.Logf("%d give-backs sent in %v at %v a round trip; the heartbeat was %v old at most",
		n, time.Since(start).Round(time.Millisecond), lag, oldest)
}
