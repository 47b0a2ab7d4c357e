package hotparam_test

import (
	"errors"
	"testing"
	"time"

	"sluice/config"
	"sluice/hotparam"
)

// heldCluster is a cluster whose windows hold passes until they are given
// back (no time passes): a pass takes n of value's count, GiveBackParam
// marks them to return and the next call on the value (a peek too) takes
// them to the window, as the cluster service does; ChargeParam adds.
type heldCluster struct {
	*fakeCluster
	count   float64
	held    map[string]int64
	pending map[string]int64
	stamp   int64
}

func (h *heldCluster) room(value string, n int64) bool {
	h.held[value] -= h.pending[value]
	h.pending[value] = 0
	return float64(h.held[value]+n) <= h.count
}

func (h *heldCluster) PeekParamLeft(r *config.ParamRule, count float64, value string, n int64, report bool) (bool, time.Duration, int64, time.Duration, error) {
	return h.room(value, n), time.Second, -1, 0, nil
}

func (h *heldCluster) ChargeParam(r *config.ParamRule, count float64, value string, n int64) error {
	h.held[value] += n
	return nil
}

func (h *heldCluster) AcquireParamStamp(r *config.ParamRule, count float64, value string, n int64, report bool) (bool, time.Duration, int64, time.Duration, int64, error) {
	if h.err != nil {
		return false, 0, -1, 0, 0, h.err
	}
	if !h.room(value, n) {
		return false, time.Second, -1, 0, 0, nil
	}
	h.held[value] += n
	h.stamp++
	return true, 0, -1, 0, h.stamp, nil
}

func (h *heldCluster) GiveBackParam(r *config.ParamRule, count float64, value string, n, stamp int64) {
	h.pending[value] += n
}

// TestClusterFailureRuleHoldsWhileInFlight: a clusterMode countOn failure
// rule (3 failed logins) lets at most 3 guesses of one value be in flight
// across the fleet at once; a success gives its place back and takes the
// give-back to Redis at once (the window holds only the failures), a
// failure keeps it, a call not forwarded gives it back. Let in on a look
// at the window, all ten guesses sent together reached the upstream.
func TestClusterFailureRuleHoldsWhileInFlight(t *testing.T) {
	svc := &heldCluster{fakeCluster: &fakeCluster{}, count: 3, held: map[string]int64{}, pending: map[string]int64{}}
	r := clusterRule(3, config.ThresholdGlobal, nil)
	r.Items = nil
	r.CountOn, r.FailureStatuses = config.CountOnFailure, []string{"401"}
	// A success's give-back is taken to the window at once (a peek).
	holdsWhileInFlight(t, compileCluster(t, svc, r), func() int64 { return svc.held["victim"] }, 2)
}

// holdsWhileInFlight runs a lockout of 3 failed logins through c: 3 of 10
// guesses sent at once are let in; after a success held() is afterSuccess
// and the next guess is let in; a call not forwarded gives its place back;
// failures keep theirs, and the fourth is refused with 3 held.
func holdsWhileInFlight(t *testing.T, c *hotparam.Checker, held func() int64, afterSuccess int64) {
	t.Helper()
	val := vals{orderID: "victim"}
	var in []hotparam.Token
	for range 10 {
		if tok, v := c.Enter(sec(1), val, 1); !v.Blocked {
			in = append(in, tok)
		}
	}
	if len(in) != 3 {
		t.Fatalf("%d of 10 guesses sent at once were let in, want 3", len(in))
	}
	in[0].Exit(sec(1), 200) // a success: its place is free again
	if got := held(); got != afterSuccess {
		t.Fatalf("after a success %d are held, want %d", got, afterSuccess)
	}
	tok, v := c.Enter(sec(1), val, 1)
	if v.Blocked {
		t.Fatalf("after a success, the next guess was refused: %+v", v)
	}
	tok.Cancel(sec(1)) // not forwarded: given back too
	in[1].Exit(sec(1), 401)
	in[2].Exit(sec(1), 401)
	tok, v = c.Enter(sec(1), val, 1)
	if v.Blocked {
		t.Fatalf("after a cancel, the next guess was refused: %+v", v)
	}
	tok.Exit(sec(1), 401)
	if _, v := c.Enter(sec(1), val, 1); !v.Blocked {
		t.Fatalf("three failures kept, yet a fourth guess was let in")
	}
	if got := held(); got != 3 {
		t.Fatalf("%d are held, want the 3 failures", got)
	}
}

// TestClusterFailureRuleSuccessesLeaveTheFallbackWhole: successes of a
// clusterMode failure rule are given back to the local bucket too, which
// learns each pass for a fallback: when Redis then fails, a user whose
// logins all succeeded is not locked out by the gateway's own bucket.
func TestClusterFailureRuleSuccessesLeaveTheFallbackWhole(t *testing.T) {
	svc := &heldCluster{fakeCluster: &fakeCluster{}, count: 3, held: map[string]int64{}, pending: map[string]int64{}}
	r := clusterRule(3, config.ThresholdGlobal, nil)
	r.Items = nil
	r.CountOn, r.FailureStatuses = config.CountOnFailure, []string{"401"}
	c := compileCluster(t, svc, r)
	val := vals{orderID: "alice"}
	for i := range 5 {
		tok, v := c.Enter(sec(1), val, 1)
		if v.Blocked {
			t.Fatalf("login %d refused: %+v", i, v)
		}
		tok.Exit(sec(1), 200)
	}
	svc.err = errors.New("redis down")
	tok, v := c.Enter(sec(1), val, 1)
	if v.Blocked {
		t.Fatalf("Redis down after five successful logins: the fallback refused alice: %+v", v)
	}
	tok.Exit(sec(1), 200)
}

// heldQuota is a cluster of calendar periods that hold their calls until
// given back: a pass adds n to value's period, GiveBackQuota takes it off
// at once, as the cluster service does, and ChargeQuota adds.
type heldQuota struct {
	*fakeCluster
	count   float64
	used    map[string]int64
	backs   int
	stamped int // charges made to a stamped period (ChargeQuotaStamp)
}

func (h *heldQuota) ChargeQuotaStamp(r *config.ParamRule, count float64, value string, n, stamp int64) error {
	if stamp != 1767225600000 {
		panic("charged with another stamp")
	}
	h.stamped++
	h.used[value] += n
	return nil
}

func (h *heldQuota) AcquireQuotaStamp(r *config.ParamRule, count float64, value string, n int64) (bool, int64, time.Duration, time.Duration, int64, error) {
	if float64(h.used[value]+n) > h.count {
		return false, 0, time.Hour, 24 * time.Hour, 0, nil
	}
	h.used[value] += n
	return true, int64(h.count) - h.used[value], time.Hour, 24 * time.Hour, 1767225600000, nil
}

func (h *heldQuota) GiveBackQuota(r *config.ParamRule, count float64, value string, n, stamp int64) {
	if stamp != 1767225600000 {
		panic("given back with another stamp")
	}
	h.backs++
	h.used[value] -= n
}

func (h *heldQuota) CheckQuota(r *config.ParamRule, count float64, value string, n int64) (bool, int64, time.Duration, time.Duration, error) {
	return float64(h.used[value]+n) <= h.count, 0, time.Hour, 24 * time.Hour, nil
}

func (h *heldQuota) ChargeQuota(r *config.ParamRule, count float64, value string, n int64) error {
	h.used[value] += n
	return nil
}

// TestCalendarFailureRuleHoldsWhileInFlight: a countOn failure rule with
// window day (3 failed logins a day) let a guess in on a look at the
// period and charged it after the answer, so ten guesses sent together
// all reached the upstream, a whole day's lockout bypassed. Now each holds
// its place in the period while in flight: 3 are let in; a success or a
// call not forwarded gives its place back at once, a failure keeps it.
func TestCalendarFailureRuleHoldsWhileInFlight(t *testing.T) {
	svc := &heldQuota{fakeCluster: &fakeCluster{}, count: 3, used: map[string]int64{}}
	r := clusterRule(3, config.ThresholdGlobal, nil)
	r.Items = nil
	r.Window, r.DurationSec = config.WindowDay, 0
	r.CountOn, r.FailureStatuses = config.CountOnFailure, []string{"401"}
	// A success's place comes off the period at once.
	holdsWhileInFlight(t, compileCluster(t, svc, r), func() int64 { return svc.used["victim"] }, 2)
	if svc.backs != 2 {
		t.Errorf("%d give-backs, want 2 (the success and the call not forwarded)", svc.backs)
	}
}

// TestCalendarQuotaCountsOnlyCallsServed: a calendar quota (3 a day) gives
// back the place of a call that is not forwarded: a later rule of the
// resource blocked it, or the caller cancelled it (a later guard, a client
// gone while queued). It kept them, so a second rule refusing three calls
// in a row used up the day and locked the value out until midnight after
// one call was served.
func TestCalendarQuotaCountsOnlyCallsServed(t *testing.T) {
	svc := &heldQuota{fakeCluster: &fakeCluster{}, count: 3, used: map[string]int64{}}
	day := clusterRule(3, config.ThresholdGlobal, nil)
	day.Items = nil
	day.Window, day.DurationSec = config.WindowDay, 0
	perSec := seedRule()
	perSec.Items, perSec.Count = nil, 1
	c := compileCluster(t, svc, day, perSec)

	tok, v := c.Enter(sec(1), order("victim"), 1)
	if v.Blocked {
		t.Fatalf("first call: %+v", v)
	}
	tok.Exit(sec(1), 200)
	for i := range 3 { // the per-second rule refuses these
		if _, v := c.Enter(sec(1.1)+int64(i), order("victim"), 1); !v.Blocked {
			t.Fatalf("call %d within the second: passed", i+2)
		}
	}
	if got := svc.used["victim"]; got != 1 {
		t.Errorf("the day's quota holds %d calls after 1 served and 3 refused by another rule, want 1", got)
	}

	tok, v = c.Enter(sec(3), order("victim"), 1)
	if v.Blocked {
		t.Fatalf("a call in the next second: %+v", v)
	}
	tok.Cancel(sec(3)) // a later guard blocked it
	if got := svc.used["victim"]; got != 1 {
		t.Errorf("after a cancelled call the day holds %d, want 1", got)
	}
	for i := range 2 {
		tok, v := c.Enter(sec(5+float64(2*i)), order("victim"), 1)
		if v.Blocked {
			t.Fatalf("served call %d of the day: %+v", i+2, v)
		}
		tok.Exit(sec(5+float64(2*i)), 200)
	}
	if _, v := c.Enter(sec(9), order("victim"), 1); !v.Blocked {
		t.Errorf("a 4th call served in the day passed")
	}
}

// TestClusterCostRuleHoldsWhileInFlight: a clusterMode cost rule (a
// figure the answer tells; 3 tokens), rolling or calendar, holds one token
// of the value's window or period while a call is in flight, so 3 of 10
// calls sent at once are let in across the fleet; a figure of 0 gives the
// token back, a figure of 4 takes 3 more. Let in on a look, all ten
// passed, and a day's quota of 10 was charged 90 by one burst.
func TestClusterCostRuleHoldsWhileInFlight(t *testing.T) {
	held := &heldCluster{fakeCluster: &fakeCluster{}, count: 3, held: map[string]int64{}, pending: map[string]int64{}}
	quota := &heldQuota{fakeCluster: &fakeCluster{}, count: 3, used: map[string]int64{}}
	for _, tc := range []struct {
		name   string
		svc    hotparam.TokenService
		window config.Window
		used   func() int64
	}{
		{"rolling window", held, "", func() int64 { held.room("victim", 0); return held.held["victim"] }},
		{"calendar day", quota, config.WindowDay, func() int64 { return quota.used["victim"] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := clusterRule(3, config.ThresholdGlobal, nil)
			r.Items = nil
			r.CountOn = "responseHeader:x-tokens-used"
			if tc.window != "" {
				r.Window, r.DurationSec = tc.window, 0
			}
			c := compileCluster(t, tc.svc, r)
			val := vals{orderID: "victim"}
			var in []hotparam.Token
			for range 10 {
				if tok, v := c.Enter(sec(1), val, 1); !v.Blocked {
					in = append(in, tok)
				}
			}
			if len(in) != 3 || tc.used() != 3 {
				t.Fatalf("%d of 10 calls sent at once were let in, %d held; want 3, 3", len(in), tc.used())
			}
			in[0].Answer(answer{"X-Tokens-Used": {"0"}})
			in[0].Exit(sec(1), 200)
			if got := tc.used(); got != 2 {
				t.Fatalf("after a call of figure 0, %d held, want 2", got)
			}
			in[1].Answer(answer{"X-Tokens-Used": {"4"}})
			in[1].Exit(sec(1), 200)
			in[2].Exit(sec(1), 200) // no figure: acquireCount, its held token
			if got := tc.used(); got != 5 {
				t.Fatalf("after figures 4 and none, %d charged, want 5", got)
			}
			if tc.window != "" && quota.stamped != 1 {
				// The figure's rest goes to the period the call was let in
				// on, not the one of the answer's clock.
				t.Errorf("%d charges to the call's own period, want 1 (the figure of 4)", quota.stamped)
			}
		})
	}
}
