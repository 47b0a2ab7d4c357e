package hotparam_test

import (
	"context"
	"testing"
	"time"

	"sluice/config"
	"sluice/hotparam"
)

// dryPair runs the same calls through an enforced rule and its dryRun
// twin, as a gateway would: the enforced rule's blocked calls never reach
// the upstream, the dryRun rule's all do and are answered. At every call
// the dryRun rule must report a would-be block exactly when the enforced
// one blocks, and an operator's /api/params must read the same of both.
func dryPair(t *testing.T, enforced, dry *hotparam.Checker, calls int, status func(i int) int, cost func(i int) []string) (blocks int) {
	t.Helper()
	for i := range calls {
		now := sec(float64(i))
		et, ev := enforced.Enter(now, order("a"), 1)
		dt, dv := dry.Enter(now, order("a"), 1)
		if dv.Blocked {
			t.Fatalf("call %d: the dryRun rule blocked", i)
		}
		if ev.Blocked != (dv.DryRun == 1) {
			t.Fatalf("call %d at %ds: enforced blocked %v, dryRun would-be blocks %d", i, i, ev.Blocked, dv.DryRun)
		}
		h := answer{}
		if c := cost(i); c != nil {
			h["X-Tokens-Used"] = c
		}
		if ev.Blocked {
			blocks++
		} else {
			et.Answer(h)
			et.Exit(now, status(i))
		}
		dt.Answer(h)
		dt.Exit(now, status(i))
	}
	at := sec(float64(calls))
	e := enforced.Report(at, []string{"a"}, 0)[0].Values[0]
	d := dry.Report(at, []string{"a"}, 0)[0].Values[0]
	if e.Remaining != d.Remaining || e.NextToken != d.NextToken || e.Blocks != d.Blocks || e.Passes != d.Passes {
		t.Fatalf("/api/params: enforced %+v, dryRun %+v: the dryRun rule's state is not the enforced one's", e, d)
	}
	return blocks
}

// TestCountOnDryRunAsIfEnforced: a dryRun rule counted after the
// answer takes nothing for a call it would have blocked (enforced, that
// call never reaches the upstream, so its answer never costs anything):
// its would-be blocks and /api/params are the enforced rule's. A failed
// login every second against 2 per 10 s: enforced, 2 pass and then one
// every 5 s; a dryRun rule that charged the would-be blocked failures too
// stayed in debt and reported every call after the second.
func TestCountOnDryRunAsIfEnforced(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rule   func() *hotparam.Checker
		dry    func() *hotparam.Checker
		status func(int) int
		cost   func(int) []string
	}{
		{
			name: "failure",
			rule: func() *hotparam.Checker { return compile(t, lockoutRule(2, 10)).For("get-order") },
			dry: func() *hotparam.Checker {
				r := lockoutRule(2, 10)
				r.DryRun = true
				return compile(t, r).For("get-order")
			},
			status: func(i int) int { return []int{401, 401, 200, 401}[i%4] },
			cost:   func(int) []string { return nil },
		},
		{
			name: "responseHeader",
			rule: func() *hotparam.Checker { return compile(t, costRule(100, 10)).For("get-order") },
			dry: func() *hotparam.Checker {
				r := costRule(100, 10)
				r.DryRun = true
				return compile(t, r).For("get-order")
			},
			status: func(int) int { return 200 },
			cost:   func(i int) []string { return []string{[]string{"40", "70", "5"}[i%3]} },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blocks := dryPair(t, tc.rule(), tc.dry(), 60, tc.status, tc.cost)
			if blocks == 0 || blocks == 60 {
				t.Fatalf("%d of 60 calls blocked: the test decides nothing", blocks)
			}
		})
	}
}

// TestCountOnDryRunClusterRefusalCharged: a dryRun clusterMode rule
// whose window refuses a call lets it through and does not charge the
// fleet's window for its answer: enforced, that call never reached the
// upstream. A call the window lets in is charged as usual.
func TestCountOnDryRunClusterRefusalCharged(t *testing.T) {
	svc := &fakeCluster{ok: false}
	r := costRule(100, 10)
	r.ClusterMode, r.DryRun = true, true
	c := compileCluster(t, svc, r)
	tok, vd := c.Enter(0, order("a"), 1)
	if vd.Blocked || vd.DryRun != 1 {
		t.Fatalf("a refused dryRun call: %+v, want let through with one would-be block", vd)
	}
	tok.Answer(answer{"X-Tokens-Used": {"50"}})
	tok.Exit(0, 200)
	if got := svc.charged["a"]; got != 0 {
		t.Fatalf("the fleet's window was charged %d for a call enforcement would have blocked", got)
	}
	svc.ok = true
	tok, vd = c.Enter(0, order("a"), 1)
	if vd.Blocked || vd.DryRun != 0 {
		t.Fatalf("a call the window lets in: %+v", vd)
	}
	tok.Answer(answer{"X-Tokens-Used": {"50"}})
	tok.Exit(0, 200)
	if got := svc.charged["a"]; got != 50 {
		t.Fatalf("charged %d, want 50", got)
	}
}

// TestCountOnDebtRetryAfterIsExact: while a value is in debt its
// calls are refused before the upstream, with Retry-After and the
// RateLimit t both the time until one token is back and r 0; a client
// that waits exactly that long is let in, a nanosecond sooner it is not.
// Figures of every size, up to a hostile 2^53.
func TestCountOnDebtRetryAfterIsExact(t *testing.T) {
	for _, figure := range []string{"101", "150", "199", "250", "9007199254740992"} {
		c := compile(t, costRule(100, 10)).For("get-order")
		// 99 leave one token: the next call is let in and overdraws.
		runAfter(t, c, []afterStep{
			{at: 0, value: "a", pass: true, status: 200, cost: []string{"99"}},
			{at: 0, value: "a", pass: true, status: 200, cost: []string{figure}},
		})
		now := sec(0.05)
		_, vd := c.Enter(now, order("a"), 1)
		if !vd.Blocked || vd.RetryAfter <= 0 {
			t.Fatalf("figure %s: %+v, want blocked with a Retry-After", figure, vd)
		}
		if !vd.HasQuota || vd.Quota.Remaining != 0 || vd.Quota.Reset != vd.RetryAfter {
			t.Fatalf("figure %s: quota %+v, want r 0 and t = Retry-After %v", figure, vd.Quota, vd.RetryAfter)
		}
		if vd.RetryAfter > time.Duration(sec(20.1)) {
			t.Fatalf("figure %s: Retry-After %v, past the bucket and its one bucket of debt", figure, vd.RetryAfter)
		}
		if _, v := c.Enter(now+int64(vd.RetryAfter)-1, order("a"), 1); !v.Blocked {
			t.Fatalf("figure %s: let in a nanosecond before Retry-After", figure)
		}
		if _, v := c.Enter(now+int64(vd.RetryAfter), order("a"), 1); v.Blocked {
			t.Fatalf("figure %s: refused at Retry-After (%v)", figure, vd.RetryAfter)
		}
	}
}

// TestForgetLiftsLockout: DELETE /api/params (Checker.Forget) lifts
// a failure lockout at once; the value then has its whole count again.
func TestForgetLiftsLockout(t *testing.T) {
	c := compile(t, lockoutRule(2, 900)).For("get-order")
	runAfter(t, c, []afterStep{
		{at: 0, value: "a", pass: true, status: 401},
		{at: 1, value: "a", pass: true, status: 401},
		{at: 2, value: "a", pass: false, retry: 448},
	})
	if n, err := c.Forget(context.Background(), "a"); n != 1 || err != nil {
		t.Fatalf("Forget: %d, %v", n, err)
	}
	runAfter(t, c, []afterStep{
		{at: 3, value: "a", pass: true, status: 401},
		{at: 4, value: "a", pass: true, status: 401},
		{at: 5, value: "a", pass: false, retry: 448},
	})
}

// TestCountOnFailureHoldsWhileInFlight: a login lockout of 5 failures
// per 15 minutes lets at most 5 guesses of one address be in flight at
// once: a call holds its token until its answer, which keeps it for a
// failure and gives it back otherwise (or when the call is not
// forwarded). Let in on a look alone, 100 guesses sent at once all
// reached the upstream.
func TestCountOnFailureHoldsWhileInFlight(t *testing.T) {
	for _, dry := range []bool{false, true} {
		r := lockoutRule(5, 900)
		r.DryRun = dry
		c := compile(t, r).For("get-order")
		wave := func(status int) (in, would int) {
			var toks []hotparam.Token
			for range 100 {
				tok, vd := c.Enter(0, order("a"), 1)
				would += vd.DryRun
				if !vd.Blocked {
					in++
					toks = append(toks, tok)
				}
			}
			for i := range toks {
				if status == 0 {
					toks[i].Cancel(0)
				} else {
					toks[i].Exit(0, status)
				}
			}
			return in - would, would
		}
		for _, st := range []struct {
			status    int
			in, would int
		}{
			{0, 5, 95},   // not forwarded: given back
			{200, 5, 95}, // successes: given back
			{401, 5, 95}, // failures: kept
			{200, 0, 100},
		} {
			in, would := wave(st.status)
			if dry {
				// A dryRun rule lets all through, reporting the blocks.
				if would != st.would {
					t.Fatalf("dryRun, a wave answered %d: %d would-be blocks, want %d", st.status, would, st.would)
				}
				continue
			}
			if in != st.in {
				t.Fatalf("a wave of 100 guesses at once, answered %d: %d let in, want %d", st.status, in, st.in)
			}
		}
	}
}

// TestLiftForgivesCallsInFlight: a lift (Checker.Forget) while a call of
// the value is in flight. Locally its answer, a failure or a figure of 40
// tokens, is charged to the forgotten state: the value's next calls find
// its whole count (two failures, then refused; ten tokens, the second call
// overdraws and the third is refused). In clusterMode the figure is sent
// to the cluster by value, after the lift, so the value's new window is
// charged (docs/admin.md, DELETE /api/params).
func TestLiftForgivesCallsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rule  config.ParamRule
		after []afterStep
	}{
		{"failure", lockoutRule(2, 900), []afterStep{
			{at: 2, value: "a", pass: true, status: 401},
			{at: 3, value: "a", pass: true, status: 401},
			{at: 4, value: "a", pass: false},
		}},
		{"figure", costRule(10, 3600), []afterStep{
			{at: 2, value: "a", pass: true, status: 200, cost: []string{"6"}},
			{at: 3, value: "a", pass: true, status: 200, cost: []string{"6"}},
			{at: 4, value: "a", pass: false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compile(t, tc.rule).For("get-order")
			tok, vd := c.Enter(sec(1), order("a"), 1)
			if vd.Blocked {
				t.Fatal("the first call was refused")
			}
			if n, err := c.Forget(t.Context(), "a"); n != 1 || err != nil {
				t.Fatalf("Forget: %d, %v", n, err)
			}
			tok.Answer(answer{"X-Tokens-Used": {"40"}})
			tok.Exit(sec(1.5), 401)
			runAfter(t, c, tc.after)
		})
	}
	t.Run("cluster", func(t *testing.T) {
		svc := &fakeCluster{ok: true}
		r := costRule(100, 10)
		r.ClusterMode = true
		c := compileCluster(t, svc, r)
		tok, vd := c.Enter(0, order("a"), 1)
		if vd.Blocked {
			t.Fatal("blocked")
		}
		if _, err := c.Forget(t.Context(), "a"); err != nil {
			t.Fatal(err)
		}
		tok.Answer(answer{"X-Tokens-Used": {"40"}})
		tok.Exit(0, 200)
		if svc.charged["a"] != 40 {
			t.Fatalf("cluster charged %v after the lift, want a: 40", svc.charged)
		}
	})
}
