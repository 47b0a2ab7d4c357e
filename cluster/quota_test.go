package cluster_test

// Calendar quotas (AcquireQuota) against a real Redis on synthetic dates.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
	"sluice/internal/calendar"
)

func quotaRule(window config.Window, zone string) *config.ParamRule {
	r := paramRule(3, 1, config.ThresholdGlobal)
	r.Window, r.Timezone = window, zone
	return r
}

// wallClock is a synthetic wall clock, shared by the Services of a test.
type wallClock struct{ ns atomic.Int64 }

func (c *wallClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *wallClock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *wallClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// nextShortDay is the next day after now that is 23 hours long in loc (the
// day daylight saving time starts): a future date, so that its keys live
// in Redis for the test, whenever the test runs.
func nextShortDay(t *testing.T, loc *time.Location) (start, reset time.Time) {
	t.Helper()
	// Day by day, each from the last one's reset: stepping 24 hours from
	// the clock's time of day skipped the short day itself when that time
	// fell in the hour it loses (04:00-05:00 UTC for New York).
	for d := time.Now().Add(48 * time.Hour); d.Before(time.Now().Add(400 * 24 * time.Hour)); d = reset {
		start, reset = calendar.Bounds(d, loc, calendar.Day)
		if reset.Sub(start) == 23*time.Hour {
			return start, reset
		}
	}
	t.Fatalf("no 23-hour day in %s within a year", loc)
	return
}

type quotaAnswer struct {
	ok            bool
	left          int64
	reset, period time.Duration
}

func acquireQuota(t *testing.T, s *cluster.Service, r *config.ParamRule, value string) quotaAnswer {
	t.Helper()
	ok, left, reset, period, err := s.AcquireQuota(r, r.Count, value, 1)
	if err != nil {
		t.Fatalf("AcquireQuota(%s): %v", value, err)
	}
	return quotaAnswer{ok, left, reset, period}
}

// A daily quota of 3 in New York on the day daylight saving time starts:
// three calls pass (2, 1, 0 left), the fourth is blocked until local
// midnight, with the period 23 hours long; a second gateway on the same
// Redis sees the same count; exactly at midnight the next day's quota
// (24 hours) starts full; other values count apart; and the period's key
// expires ten minutes after its reset.
func TestDailyQuotaOnASpringForwardDay(t *testing.T) {
	srv := startPrivateRedis(t)
	rdb := redis.NewClient(must(redis.ParseURL(srv.url())))
	defer rdb.Close()
	loc, _ := time.LoadLocation("America/New_York")
	_, midnight := nextShortDay(t, loc)
	clock := new(wallClock)
	clock.set(midnight.Add(-10 * time.Second))
	opts := cluster.Options{URL: srv.url(), Namespace: "quota", Timeout: 5 * time.Second, Heartbeat: time.Hour}
	a, b := newService(t, opts), newService(t, opts)
	a.SetWallClock(clock.now)
	b.SetWallClock(clock.now)
	r := quotaRule(config.WindowDay, "America/New_York")

	for i, want := range []quotaAnswer{
		{true, 2, 10 * time.Second, 23 * time.Hour},
		{true, 1, 10 * time.Second, 23 * time.Hour},
		{true, 0, 10 * time.Second, 23 * time.Hour},
		{false, 0, 10 * time.Second, 23 * time.Hour},
	} {
		if got := acquireQuota(t, a, r, "key-1"); got != want {
			t.Errorf("call %d on gateway a: %+v, want %+v", i+1, got, want)
		}
	}
	if got := acquireQuota(t, b, r, "key-1"); got.ok {
		t.Errorf("gateway b passed a value gateway a used up: %+v", got)
	}
	// What an operator sees (GET /api/params): taken from Redis, taking nothing.
	for _, v := range []struct {
		value string
		left  int64
	}{{"key-1", 0}, {"key-never-seen", 3}, {"key-1", 0}} {
		left, reset, err := b.PeekQuota(context.Background(), r, r.Count, v.value)
		if err != nil || left != v.left || reset != 10*time.Second {
			t.Errorf("PeekQuota(%s) = %d, %v, %v; want %d left, reset in 10s", v.value, left, reset, err, v.left)
		}
	}
	if got := acquireQuota(t, b, r, "key-2"); !got.ok || got.left != 2 {
		t.Errorf("another value on gateway b: %+v, want passed with 2 left", got)
	}

	clock.set(midnight.Add(-1))
	if got := acquireQuota(t, a, r, "key-1"); got.ok || got.reset != 1 {
		t.Errorf("a nanosecond before midnight: %+v, want blocked, reset in 1ns", got)
	}
	keys, err := rdb.Keys(context.Background(), "{quota:q:*").Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys %q (%v), want one per value", keys, err)
	}
	day := midnight.Add(-time.Hour).In(loc).Format("2006-01-02")
	for _, k := range keys {
		if k[len(k)-len(day):] != day {
			t.Errorf("key %q does not end with the local date %s", k, day)
		}
		// On Redis's clock: the keys were last counted 10 s before the
		// reset on the gateways' clock. The gateways' clock is read
		// against Redis's by a heartbeat, to within its round trip and
		// a millisecond of rounding on each side: a little later is
		// right too (CI saw 10m10.001s).
		ttl, err := rdb.PTTL(context.Background(), k).Result()
		if want := 10*time.Minute + 10*time.Second; err != nil || ttl < want-3*time.Second || ttl > want+time.Second {
			t.Errorf("key %q expires in %v (%v), want %v (ten minutes after the reset)", k, ttl, err, want)
		}
	}

	clock.set(midnight)
	want := quotaAnswer{true, 2, 24 * time.Hour, 24 * time.Hour}
	if got := acquireQuota(t, a, r, "key-1"); got != want {
		t.Errorf("exactly at midnight: %+v, want %+v (a fresh day)", got, want)
	}
	if got := acquireQuota(t, b, r, "key-1"); !got.ok || got.left != 1 {
		t.Errorf("gateway b after midnight: %+v, want passed with 1 left", got)
	}
}

// A monthly quota in UTC counts across the month's days and resets on the
// 1st; an item's count is a quota of its own; ForgetParam lifts a value's
// count of the period.
func TestMonthlyQuota(t *testing.T) {
	srv := startPrivateRedis(t)
	loc := time.UTC
	now := time.Now().In(loc)
	// the 31st of the next month that has one, 12:00
	var at time.Time
	for m := 1; ; m++ {
		d := time.Date(now.Year(), now.Month()+time.Month(m), 31, 12, 0, 0, 0, loc)
		if d.Day() == 31 {
			at = d
			break
		}
	}
	clock := new(wallClock)
	clock.set(at.AddDate(0, 0, -30)) // the 1st
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: "month", Timeout: 5 * time.Second, Heartbeat: time.Hour})
	s.SetWallClock(clock.now)
	r := quotaRule(config.WindowMonth, "UTC")
	for i := range 3 {
		if got := acquireQuota(t, s, r, "k"); !got.ok {
			t.Fatalf("call %d of 3 on day %d refused", i+1, clock.now().Day())
		}
		clock.add(10 * 24 * time.Hour)
	}
	// the 31st
	if got := acquireQuota(t, s, r, "k"); got.ok || got.left != 0 || got.reset != 12*time.Hour || got.period != 31*24*time.Hour {
		t.Errorf("the 4th call, on the 31st: %+v, want blocked with 0 left 12h before the 1st, period 31 days", got)
	}
	// The block the gateway remembers says the same, without Redis.
	if got := acquireQuota(t, s, r, "k"); got.ok || got.left != 0 || got.reset != 12*time.Hour {
		t.Errorf("the 5th call, on the 31st: %+v, want blocked with 0 left 12h before the 1st", got)
	}
	if ok, left, _, _, err := s.AcquireQuota(r, 10, "k", 1); err != nil || !ok || left != 9 {
		t.Errorf("the same value at an item's count of 10: ok=%v left=%d err=%v, want a quota of its own", ok, left, err)
	}
	// An operator lifts the value (DELETE /api/params): this month starts afresh.
	if err := s.ForgetParam(context.Background(), r, r.Count, "k"); err != nil {
		t.Fatal(err)
	}
	if got := acquireQuota(t, s, r, "k"); !got.ok || got.left != 2 {
		t.Errorf("after ForgetParam: %+v, want passed with 2 left", got)
	}
	acquireQuota(t, s, r, "k")
	acquireQuota(t, s, r, "k")
	clock.add(12 * time.Hour)
	if got := acquireQuota(t, s, r, "k"); !got.ok || got.left != 2 {
		t.Errorf("on the 1st: %+v, want passed with 2 left", got)
	}
}

// A monthly quota charged after the answer (countOn responseHeader): a
// check takes nothing; charges add what each answer cost, past the count
// too; an overdrawn month refuses the value on every gateway until the 1st,
// with the reset as its retry; an operator's lift empties it; and the next
// month starts whole, the debt forgotten.
func TestMonthlyQuotaChargedAfterTheAnswer(t *testing.T) {
	srv := startPrivateRedis(t)
	now := time.Now().UTC()
	at := time.Date(now.Year(), now.Month()+2, 20, 0, 0, 0, 0, time.UTC) // a future month, so its keys live
	clock := new(wallClock)
	clock.set(at)
	opts := cluster.Options{URL: srv.url(), Namespace: "tokens", Timeout: 5 * time.Second, Heartbeat: time.Hour}
	a, b := newService(t, opts), newService(t, opts)
	a.SetWallClock(clock.now)
	b.SetWallClock(clock.now)
	r := quotaRule(config.WindowMonth, "UTC")
	r.Count, r.CountOn = 1000, "responseHeader:X-Tokens-Used"
	check := func(s *cluster.Service) quotaAnswer {
		t.Helper()
		ok, left, reset, period, err := s.CheckQuota(r, r.Count, "key1", 1)
		if err != nil {
			t.Fatalf("CheckQuota: %v", err)
		}
		return quotaAnswer{ok, left, reset, period}
	}
	charge := func(s *cluster.Service, n int64) {
		t.Helper()
		if err := s.ChargeQuota(r, r.Count, "key1", n); err != nil {
			t.Fatalf("ChargeQuota(%d): %v", n, err)
		}
	}
	toReset := time.Date(at.Year(), at.Month()+1, 1, 0, 0, 0, 0, time.UTC).Sub(at)
	for i := range 3 {
		if got := check(a); !got.ok || got.left != 1000 || got.reset != toReset {
			t.Fatalf("check %d before any charge: %+v, want passed, 1000 left, reset in %v", i+1, got, toReset)
		}
	}
	charge(a, 600)
	if got := check(b); !got.ok || got.left != 400 {
		t.Errorf("after a charge of 600 on another gateway: %+v, want passed with 400 left", got)
	}
	charge(b, 600) // the last call overdraws
	for _, s := range []*cluster.Service{a, b} {
		if got := check(s); got.ok || got.left != 0 || got.reset != toReset {
			t.Errorf("overdrawn (1200 of 1000): %+v, want refused with 0 left until the reset in %v", got, toReset)
		}
	}
	if err := a.ForgetParam(context.Background(), r, r.Count, "key1"); err != nil {
		t.Fatal(err)
	}
	if got := check(a); !got.ok || got.left != 1000 {
		t.Errorf("after the lift: %+v, want passed with 1000 left", got)
	}
	charge(a, 5000)
	if got := check(a); got.ok {
		t.Errorf("overdrawn again (5000): %+v, want refused", got)
	}
	clock.add(toReset)
	if got := check(a); !got.ok || got.left != 1000 {
		t.Errorf("on the 1st: %+v, want the month whole (1000 left), the debt not carried", got)
	}
	if got := check(b); !got.ok || got.left != 1000 {
		t.Errorf("on the 1st, the other gateway: %+v, want 1000 left", got)
	}
}

// An upstream may answer any cost (hotparam.ParseCost gives up to 2^53 for
// a figure like 99999999999999999999). The period's counter stops at 2^53:
// a thousand such answers in one period once overflowed Redis's INCRBY,
// failed the script, and three failures opened the breaker, so every
// clusterMode rule of the gateway fell back to local limits until the
// period reset. Now every charge succeeds, the value stays refused until
// the reset, another value of the rule is untouched, and small charges
// still count exactly.
func TestQuotaChargeOfAnyCostSaturates(t *testing.T) {
	srv := startPrivateRedis(t)
	now := time.Now().UTC()
	clock := new(wallClock)
	clock.set(time.Date(now.Year(), now.Month()+2, 20, 0, 0, 0, 0, time.UTC))
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: "ovf", Timeout: 5 * time.Second, Heartbeat: time.Hour})
	s.SetWallClock(clock.now)
	r := quotaRule(config.WindowMonth, "UTC")
	r.Count, r.CountOn = 1000, "responseHeader:X-Tokens-Used"
	const hostile = int64(1) << 53
	for i := range 1030 {
		if err := s.ChargeQuota(r, r.Count, "key1", hostile); err != nil {
			t.Fatalf("charge %d of 2^53: %v", i+1, err)
		}
	}
	if !s.Up() {
		t.Fatal("the breaker opened: the gateway's cluster limiting is off")
	}
	if ok, left, _, _, err := s.CheckQuota(r, r.Count, "key1", 1); err != nil || ok || left != 0 {
		t.Errorf("key1 after the hostile answers: ok=%v left=%d err=%v, want refused with 0 left", ok, left, err)
	}
	if err := s.ChargeQuota(r, r.Count, "key2", 7); err != nil {
		t.Fatal(err)
	}
	if ok, left, _, _, err := s.CheckQuota(r, r.Count, "key2", 1); err != nil || !ok || left != 993 {
		t.Errorf("another value charged 7: ok=%v left=%d err=%v, want passed with 993 left", ok, left, err)
	}
}

// TestQuotaGiveBack: a countOn failure call holds its place in a calendar
// period while in flight (AcquireQuotaStamp) and gives it back unless its
// answer is a failure. The place is taken off at once, in Redis: a value
// the period refused is let in again at once on the gateway that gave it
// back, and within a second on another that noted the refusal (it was
// noted until the period's reset, the next day). The count never goes below 0, and a
// period that has ended is left alone: a give-back after midnight does
// not free a place of the new day.
func TestQuotaGiveBack(t *testing.T) {
	srv := startPrivateRedis(t)
	clock := new(wallClock)
	day := time.Now().Add(48 * time.Hour).UTC().Truncate(24 * time.Hour)
	clock.set(day.Add(23*time.Hour + 59*time.Minute))
	opts := cluster.Options{URL: srv.url(), Namespace: "giveback", Timeout: 5 * time.Second, Heartbeat: time.Hour}
	a, b := newService(t, opts), newService(t, opts)
	a.SetWallClock(clock.now)
	b.SetWallClock(clock.now)
	r := quotaRule(config.WindowDay, "UTC")
	r.CountOn, r.FailureStatuses = config.CountOnFailure, []string{"401"}
	var stamps []int64
	for i := range 3 {
		ok, left, _, _, stamp, err := a.AcquireQuotaStamp(r, r.Count, "mallory", 1)
		if err != nil || !ok || left != int64(2-i) || stamp != day.UnixMilli() {
			t.Fatalf("call %d: ok %v, left %d, stamp %d, %v; want a pass, %d left, the day's start %d", i, ok, left, stamp, err, 2-i, day.UnixMilli())
		}
		stamps = append(stamps, stamp)
	}
	for _, s := range []*cluster.Service{a, b} {
		if ok, _, _, _, _, _ := s.AcquireQuotaStamp(r, r.Count, "mallory", 1); ok {
			t.Fatal("a fourth call passed a full period")
		}
	}
	a.GiveBackQuota(r, r.Count, "mallory", 1, stamps[0]) // a success
	// Gateway a forgets its refusal at once; b, which noted one too, asks
	// Redis again within a second (maxCachedBlock), not at the period's reset.
	ok, left, _, _, _, err := a.AcquireQuotaStamp(r, r.Count, "mallory", 1)
	if err != nil || !ok || left != 0 {
		t.Fatalf("after a give-back, gateway a: ok %v, left %d, %v; want the freed place", ok, left, err)
	}
	a.GiveBackQuota(r, r.Count, "mallory", 1, stamps[0])
	clock.add(time.Second)
	ok, left, _, _, _, err = b.AcquireQuotaStamp(r, r.Count, "mallory", 1)
	if err != nil || !ok || left != 0 {
		t.Fatalf("a second after a give-back on gateway a, gateway b: ok %v, left %d, %v; want the freed place", ok, left, err)
	}
	b.GiveBackQuota(r, r.Count, "mallory", 1, stamps[0])
	// More back than was ever taken: the count stops at 0.
	for range 5 {
		b.GiveBackQuota(r, r.Count, "mallory", 1, stamps[0])
	}
	if left, _, err := a.PeekQuota(context.Background(), r, r.Count, "mallory"); err != nil || left != 3 {
		t.Fatalf("after giving back more than was taken: %d left (%v), want 3", left, err)
	}
	// Taken in the old day, given back in the new: the new day is whole
	// and keeps what it took.
	ok, _, _, _, old, _ := a.AcquireQuotaStamp(r, r.Count, "eve", 1)
	clock.set(day.Add(24 * time.Hour))
	if ok2, _, _, _, _, _ := a.AcquireQuotaStamp(r, r.Count, "eve", 1); !ok || !ok2 {
		t.Fatal("eve's calls were refused")
	}
	a.GiveBackQuota(r, r.Count, "eve", 1, old)
	if left, _, err := a.PeekQuota(context.Background(), r, r.Count, "eve"); err != nil || left != 2 {
		t.Fatalf("the new day after a give-back of the old day's call: %d left (%v), want 2", left, err)
	}
}

// TestQuotaChargeGoesToThePeriodOfTheCall: a figure's call holds a place
// of the period it was let in on (3 a day); its answer's figure is charged
// to that period while it lasts, and to none once it has ended. Charged by
// the clock at the answer, a call let in a second before midnight and
// answered after it spent the next day's quota (6 of 10 of a fresh day).
func TestQuotaChargeGoesToThePeriodOfTheCall(t *testing.T) {
	srv := startPrivateRedis(t)
	clock := new(wallClock)
	day := time.Now().Add(48 * time.Hour).UTC().Truncate(24 * time.Hour)
	clock.set(day.Add(24*time.Hour - 2*time.Second))
	s := newService(t, cluster.Options{URL: srv.url(), Namespace: "stamped", Timeout: 5 * time.Second, Heartbeat: time.Hour})
	s.SetWallClock(clock.now)
	r := quotaRule(config.WindowDay, "UTC")
	r.CountOn = "responseHeader:X-Tokens-Used"
	left := func() int64 {
		t.Helper()
		_, left, _, _, err := s.CheckQuota(r, r.Count, "key", 1)
		if err != nil {
			t.Fatal(err)
		}
		return left
	}
	_, _, _, _, early, err := s.AcquireQuotaStamp(r, r.Count, "key", 1)
	if err != nil || early != day.UnixMilli() {
		t.Fatalf("stamp %d, %v; want the day's start", early, err)
	}
	if err := s.ChargeQuotaStamp(r, r.Count, "key", 1, early); err != nil || left() != 1 {
		t.Fatalf("charged 1 more the same day: %d left, %v; want 1", left(), err)
	}
	_, _, _, _, late, err := s.AcquireQuotaStamp(r, r.Count, "key", 1)
	if err != nil || late != early {
		t.Fatalf("second stamp %d, %v", late, err)
	}
	clock.add(2 * time.Second) // midnight: the call is answered the next day
	if err := s.ChargeQuotaStamp(r, r.Count, "key", 5, late); err != nil {
		t.Fatal(err)
	}
	if got := left(); got != 3 {
		t.Errorf("the next day, after a call of the day before was answered: %d left, want the whole 3", got)
	}
}
