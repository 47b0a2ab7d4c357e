package cluster_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice/cluster"
	"sluice/config"
	"sluice/internal/redistest"
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
	// Kept either way, and sent again once Redis answers; Redis ran the
	// first by then, if it got it.
	waitFor(t, 5*time.Second, "the give-back sent again", func() bool { return s.QuotaReturnsKept() == 0 })
	if left, _, err := s.PeekQuota(context.Background(), r, r.Count, "k"); err != nil || left != 1 {
		t.Fatalf("3 taken, 1 given back across a stall: %d left (%v), want 1", left, err)
	}
}

// TestQuotaGiveBackLostOnTheWayIsSentAgain: a give-back whose round trip
// failed before it reached Redis (the way cut, the breaker still closed)
// is kept, kept again when sent again in vain, and taken once Redis
// answers: the success is not left charged as a failure for the day. It
// was dropped, as one that might have reached Redis: a stall longer than
// the timeout left 2 guesses of 3.
func TestQuotaGiveBackLostOnTheWayIsSentAgain(t *testing.T) {
	srv := startPrivateRedis(t)
	px := startCutProxy(t, srv)
	clock := new(wallClock)
	day := time.Now().Add(48 * time.Hour).UTC().Truncate(24 * time.Hour)
	clock.set(day.Add(9 * time.Hour))
	// A heartbeat of a second, as in production: the breaker, which takes
	// three failed round trips, stays closed for the give-back's.
	s := newService(t, cluster.Options{URL: px.url(), Namespace: "lost", Timeout: 100 * time.Millisecond, Heartbeat: time.Second})
	direct := newService(t, cluster.Options{URL: srv.url(), Namespace: "lost", Timeout: 5 * time.Second, Heartbeat: time.Hour})
	s.SetWallClock(clock.now)
	direct.SetWallClock(clock.now)
	r := quotaRule(config.WindowDay, "UTC")
	r.CountOn, r.FailureStatuses = config.CountOnFailure, []string{"401"}
	left := func() int64 { return quotaLeft(t, direct, r, "lost-k") }
	ok, _, _, _, stamp, err := s.AcquireQuotaStamp(r, r.Count, "lost-k", 1)
	if err != nil || !ok || stamp == 0 {
		t.Fatalf("the call: ok %v stamp %d %v", ok, stamp, err)
	}
	px.cut(true)
	s.GiveBackQuota(r, r.Count, "lost-k", 1, stamp) // its answer: a success; the round trip fails
	if got := left(); got != 2 {
		t.Fatalf("the give-back lost on the way: Redis has %d left, want 2 (it never saw it)", got)
	}
	// Sent again, as Run does once Redis answers, while the way is still
	// cut: kept again.
	s.SendQuotaReturns()
	if kept := s.QuotaReturnsKept(); kept != 1 {
		t.Errorf("the give-back lost on the way, sent again in vain: %d kept, want 1", kept)
	}
	px.cut(false)
	waitFor(t, 10*time.Second, "the success given back once Redis answers: 3 left", func() bool { return left() == 3 })
	waitFor(t, 5*time.Second, "nothing kept", func() bool { return s.QuotaReturnsKept() == 0 })
	if got := left(); got != 3 {
		t.Fatalf("after every give-back was sent: %d left, want 3", got)
	}
}

// TestQuotaGiveBackSentAgainWhileItsMarkLasts: Redis forgets a give-back's
// mark quotaMarkLife after taking it (so its memory holds minutes of
// give-backs, not a day's or a month's), so one whose round trip failed
// is sent again only within quotaResendWithin of its first send: past it,
// it is dropped and stays charged, as it was before give-backs had ids.
// One never sent (the breaker open) has no mark to outlive: it is sent
// however long Redis failed.
func TestQuotaGiveBackSentAgainWhileItsMarkLasts(t *testing.T) {
	srv := startPrivateRedis(t)
	px := startCutProxy(t, srv)
	clock := new(wallClock)
	day := time.Now().Add(48 * time.Hour).UTC().Truncate(24 * time.Hour)
	clock.set(day.Add(9 * time.Hour))
	s := newService(t, cluster.Options{URL: px.url(), Namespace: "late", Timeout: 100 * time.Millisecond, Heartbeat: 100 * time.Millisecond})
	direct := newService(t, cluster.Options{URL: srv.url(), Namespace: "late", Timeout: 5 * time.Second, Heartbeat: time.Hour})
	s.SetWallClock(clock.now)
	direct.SetWallClock(clock.now)
	r := quotaRule(config.WindowDay, "UTC") // count 3
	r.CountOn, r.FailureStatuses = config.CountOnFailure, []string{"401"}
	left := func() int64 { return quotaLeft(t, direct, r, "k") }
	take := func() int64 {
		t.Helper()
		waitFor(t, 5*time.Second, "Redis up", s.Up)
		ok, _, _, _, stamp, err := s.AcquireQuotaStamp(r, r.Count, "k", 1)
		if err != nil || !ok {
			t.Fatalf("a call: ok %v %v", ok, err)
		}
		return stamp
	}

	// Sent, lost on the way, and Redis answers again too late.
	stamp := take()
	px.cut(true)
	s.GiveBackQuota(r, r.Count, "k", 1, stamp)
	clock.add(cluster.QuotaResendWithin + time.Second)
	px.cut(false)
	s.SendQuotaReturns()
	if kept, got := s.QuotaReturnsKept(), left(); kept != 0 || got != 2 {
		t.Fatalf("a give-back first sent %v ago: %d kept, %d left; want it dropped, 0 kept and 2 left", cluster.QuotaResendWithin+time.Second, kept, got)
	}

	// Never sent: the breaker was open.
	stamp = take()
	px.cut(true)
	waitFor(t, 5*time.Second, "the breaker open", func() bool { return !s.Up() })
	s.GiveBackQuota(r, r.Count, "k", 1, stamp)
	clock.add(cluster.QuotaResendWithin + time.Second)
	px.cut(false)
	waitFor(t, 10*time.Second, "the give-back never sent, sent once Redis answers: 2 left", func() bool { return left() == 2 })
	waitFor(t, 5*time.Second, "nothing kept", func() bool { return s.QuotaReturnsKept() == 0 })
}

// TestQuotaGiveBackTakenOncePerID: Redis takes a give-back once by its id
// (the script's mark, expiring with the counter or quotaMarkLife after it
// is set, whichever comes first: two minutes, against 15 hours to the
// reset of the gateway's day):
// sent twice, as after a
// round trip whose answer was lost, it frees one place; another id frees
// another. On a Redis Cluster too: the mark, which the script names
// itself, lies in the counter's hash slot (another slot may be on another
// shard, out of the script's reach).
func TestQuotaGiveBackTakenOncePerID(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		s := newService(t, cluster.Options{URL: srv.URL(), Namespace: "once", Timeout: 5 * time.Second, Heartbeat: time.Hour})
		checkGiveBackOncePerID(t, s, srv)
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartSingleShardCluster(t, time.Second)
		s := newService(t, cluster.Options{Redis: config.RedisTarget{ClusterAddrs: cl.Addrs()}, Namespace: "once", Timeout: 5 * time.Second, Heartbeat: time.Hour})
		counter, mark := checkGiveBackOncePerID(t, s, cl.Nodes[0])
		if c, m := cl.Slot(t, counter), cl.Slot(t, mark); c != m {
			t.Errorf("the counter %q in slot %d, its mark %q in slot %d", counter, c, mark, m)
		}
	})
}

// checkGiveBackOncePerID gives back two of 3 calls of a day through s,
// one of them twice, reads the keys on node, and returns the counter's
// key and a mark's.
func checkGiveBackOncePerID(t *testing.T, s *cluster.Service, node *redistest.Server) (counter, mark string) {
	t.Helper()
	clock := new(wallClock)
	day := time.Now().Add(48 * time.Hour).UTC().Truncate(24 * time.Hour)
	clock.set(day.Add(9 * time.Hour))
	s.SetWallClock(clock.now)
	r := quotaRule(config.WindowDay, "UTC") // count 3
	left := func() int64 { return quotaLeft(t, s, r, "k") }
	var stamp int64
	for i := range 3 {
		ok, _, _, _, st, err := s.AcquireQuotaStamp(r, r.Count, "k", 1)
		if err != nil || !ok {
			t.Fatalf("call %d: ok %v %v", i, ok, err)
		}
		stamp = st
	}
	for i := range 2 {
		if err := s.GiveBackQuotaID(r, r.Count, "k", 1, stamp, 7); err != nil {
			t.Fatalf("give-back 7, send %d: %v", i, err)
		}
	}
	if got := left(); got != 1 {
		t.Fatalf("3 taken, give-back 7 sent twice: %d left, want 1", got)
	}
	if err := s.GiveBackQuotaID(r, r.Count, "k", 1, stamp, 8); err != nil {
		t.Fatal(err)
	}
	if got := left(); got != 2 {
		t.Fatalf("3 taken, give-backs 7 and 8: %d left, want 2", got)
	}

	// The marks: the counter's key, ":back:" and the id.
	keys, err := node.Keys("{once:q:*")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.Contains(k, ":back:") {
			counter = k
		}
	}
	if want := []string{counter, counter + ":back:7", counter + ":back:8"}; !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	ttl := func(k string) int64 {
		t.Helper()
		r, err := node.Do("PTTL", k)
		if err != nil {
			t.Fatal(err)
		}
		ms, _ := strconv.ParseInt(r.(string), 10, 64)
		return ms
	}
	mark = counter + ":back:7"
	life := cluster.QuotaMarkLife.Milliseconds()
	if c, m := ttl(counter), ttl(mark); c < 15*3600*1000 || m <= life-60000 || m > life {
		t.Errorf("the counter expires in %d ms, a mark in %d ms: want the mark in %d ms at most, and soon after", c, m, life)
	}
	return counter, mark
}

// quotaLeft is what value's period of r has left, as s reads it.
func quotaLeft(t *testing.T, s *cluster.Service, r *config.ParamRule, value string) int64 {
	t.Helper()
	left, _, err := s.PeekQuota(context.Background(), r, r.Count, value)
	if err != nil {
		t.Fatal(err)
	}
	return left
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
