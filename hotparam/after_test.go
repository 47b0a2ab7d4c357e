package hotparam_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice/config"
	"sluice/hotparam"
	"sluice/limiter"
)

// answer is an upstream's answer headers, as a test writes them.
type answer map[string][]string

func (a answer) Header(name string) []string { return a[name] }

// lockoutRule is the login lockout of docs/recipes.md: count failed logins
// (401) per address, count per durationSec.
func lockoutRule(count float64, durationSec int64) config.ParamRule {
	r := seedRule()
	r.Items = nil
	r.Count, r.DurationSec = count, durationSec
	r.CountOn, r.FailureStatuses = config.CountOnFailure, []string{"401"}
	return r
}

// costRule takes the figure of X-Tokens-Used: count per durationSec.
// answerAll answers each held call with the figure and ends it.
func answerAll(toks []hotparam.Token, figure string) {
	for i := range toks {
		toks[i].Answer(answer{"X-Tokens-Used": {figure}})
		toks[i].Exit(0, 200)
	}
}

// blockedFor enters one call of value "a" at 0 and reports whether it is
// blocked with a Retry-After of secs (within a millisecond).
func blockedFor(c *hotparam.Checker, secs float64) (limiter.Verdict, bool) {
	_, vd := c.Enter(0, order("a"), 1)
	return vd, vd.Blocked && (vd.RetryAfter-time.Duration(sec(secs))).Abs() <= time.Millisecond
}

func costRule(count float64, durationSec int64) config.ParamRule {
	r := seedRule()
	r.Items = nil
	r.Count, r.DurationSec = count, durationSec
	r.CountOn = "responseHeader:x-tokens-used" // canonicalised by config
	return r
}

// afterStep is one call at an instant: whether it is let in and, if so,
// the answer it gets (status, and the X-Tokens-Used header, if any).
type afterStep struct {
	at      float64 // seconds
	value   string
	pass    bool
	retry   float64 // blocked: Retry-After in seconds (0: not checked)
	status  int
	cost    []string // X-Tokens-Used values; nil: no header
	dryRuns int      // Verdict.DryRun
}

func runAfter(t *testing.T, c *hotparam.Checker, steps []afterStep) {
	t.Helper()
	for i, st := range steps {
		now := sec(st.at)
		tok, vd := c.Enter(now, order(st.value), 1)
		if vd.Blocked == st.pass {
			t.Fatalf("step %d (%.3fs, %s): blocked %v, want pass %v", i, st.at, st.value, vd.Blocked, st.pass)
		}
		if vd.DryRun != st.dryRuns {
			t.Fatalf("step %d: DryRun %d, want %d", i, vd.DryRun, st.dryRuns)
		}
		if !st.pass {
			if st.retry > 0 && (vd.RetryAfter-time.Duration(sec(st.retry))).Abs() > time.Millisecond {
				t.Fatalf("step %d: RetryAfter %v, want %vs", i, vd.RetryAfter, st.retry)
			}
			continue
		}
		h := answer{}
		if st.cost != nil {
			h["X-Tokens-Used"] = st.cost
		}
		tok.Answer(h)
		tok.Exit(now, st.status)
	}
}

// TestCountOnFailure: only answers in failureStatuses take tokens, after
// the answer; successes in between cost nothing; once the failures have
// taken every token, the next call is blocked before it is answered, until
// a token refills (durationSec/count).
func TestCountOnFailure(t *testing.T) {
	c := compile(t, lockoutRule(3, 900)).For("get-order")
	runAfter(t, c, []afterStep{
		{at: 0, value: "a", pass: true, status: 401},
		{at: 1, value: "a", pass: true, status: 200}, // a success: free
		{at: 2, value: "a", pass: true, status: 401},
		{at: 3, value: "a", pass: true, status: 200},
		{at: 4, value: "a", pass: true, status: 302},
		{at: 5, value: "a", pass: true, status: 0},   // no answer (transport failure): free
		{at: 6, value: "b", pass: true, status: 401}, // another address has its own count
		{at: 7, value: "a", pass: true, status: 401}, // the third failure
		{at: 8, value: "a", pass: false, retry: 292}, // the first failure's token is back at 300 s
		{at: 8, value: "b", pass: true, status: 200},
		{at: 299, value: "a", pass: false, retry: 1},
		{at: 300, value: "a", pass: true, status: 401},
		{at: 301, value: "a", pass: false, retry: 299},
	})
}

// TestCountOnFailureClasses: a class in failureStatuses (4xx) counts each
// of its codes.
func TestCountOnFailureClasses(t *testing.T) {
	r := lockoutRule(2, 60)
	r.FailureStatuses = []string{"4xx"}
	c := compile(t, r).For("get-order")
	runAfter(t, c, []afterStep{
		{at: 0, value: "a", pass: true, status: 500},
		{at: 0, value: "a", pass: true, status: 403},
		{at: 0, value: "a", pass: true, status: 429},
		{at: 0, value: "a", pass: false, retry: 30},
	})
}

// TestCountOnHeaderDebt: a call is let in while its value has a token left;
// the answer's figure is taken after it, which may overdraw the bucket; the
// debt is paid from refills before the next call is let in. An answer
// without the figure (or with a malformed one) costs acquireCount.
func TestCountOnHeaderDebt(t *testing.T) {
	// 100 tokens per 10 s: one token every 0.1 s.
	c := compile(t, costRule(100, 10)).For("get-order")
	runAfter(t, c, []afterStep{
		{at: 0, value: "a", pass: true, status: 200, cost: []string{"70"}},
		{at: 0, value: "a", pass: true, status: 200, cost: []string{"29"}}, // 1 left
		{at: 0, value: "a", pass: true, status: 200, cost: []string{"51"}}, // overdraws: 50 in debt
		// The debt and one token: 51 tokens, 5.1 s.
		{at: 0, value: "a", pass: false, retry: 5.1},
		{at: 5, value: "a", pass: false, retry: 0.1},
		{at: 5.1, value: "a", pass: true, status: 200},                        // no figure: acquireCount (1)
		{at: 5.2, value: "a", pass: true, status: 200, cost: []string{"-5"}},  // malformed: 1
		{at: 5.25, value: "a", pass: false, retry: 0.05},                      // each cost a token
		{at: 5.4, value: "a", pass: true, status: 200, cost: []string{"0"}},   // free
		{at: 5.4, value: "a", pass: true, status: 200, cost: []string{"1e3"}}, // malformed: 1
		{at: 5.4, value: "b", pass: true, status: 200, cost: []string{"100"}}, // b's own bucket
		{at: 5.4, value: "b", pass: false, retry: 0.1},
	})
}

// TestCountOnHeaderCap: a figure past the value's whole bucket takes the
// whole bucket, and the debt never passes one bucket, so that a broken or
// hostile upstream keeps a value out for at most about two durationSec.
func TestCountOnHeaderCap(t *testing.T) {
	c := compile(t, costRule(100, 10)).For("get-order")
	runAfter(t, c, []afterStep{
		{at: 0, value: "a", pass: true, status: 200, cost: []string{"99"}},
		{at: 0, value: "a", pass: true, status: 200, cost: []string{strings.Repeat("9", 40)}},
		// 99, then the one token held and the rest capped: the debt is one
		// bucket, plus the one to pass: 10.1 s.
		{at: 0, value: "a", pass: false, retry: 10.1},
		{at: 10.1, value: "a", pass: true, status: 200, cost: []string{"1000000"}}, // one bucket in debt again
		{at: 10.1, value: "a", pass: false, retry: 10.1},
	})
	// Calls let in together all overdraw: the debt stays at one bucket.
	c = compile(t, costRule(100, 10)).For("get-order")
	var toks []hotparam.Token
	for range 5 {
		tok, vd := c.Enter(0, order("a"), 1)
		if vd.Blocked {
			t.Fatal("a full bucket blocked")
		}
		toks = append(toks, tok)
	}
	answerAll(toks, "100")
	if vd, ok := blockedFor(c, 10.1); !ok {
		t.Fatalf("after 500 tokens on a bucket of 100: %+v, want blocked for 10.1 s (the debt capped at one bucket, and a token)", vd)
	}
}

// TestCountOnHeaderHoldsInFlight: a call whose figure the answer will tell
// holds one token while it is in flight, so calls sent at once pass only as
// many as the bucket holds (5 of 20 here); a figure of 0 gives the token
// back, a figure of 3 takes 2 more. Let in on a look, all 20 passed and
// overdrew the bucket 60 tokens deep, most of it forgiven by the debt cap.
func TestCountOnHeaderHoldsInFlight(t *testing.T) {
	c := compile(t, costRule(5, 10)).For("get-order") // a token every 2 s
	var toks []hotparam.Token
	for i := range 20 {
		tok, vd := c.Enter(0, order("a"), 1)
		if vd.Blocked != (i >= 5) {
			t.Fatalf("call %d of 20 sent at once: blocked %v, want %v (5 tokens)", i+1, vd.Blocked, i >= 5)
		}
		if !vd.Blocked {
			toks = append(toks, tok)
		}
	}
	toks[0].Answer(answer{"X-Tokens-Used": {"0"}})
	toks[0].Exit(0, 200) // free: its token comes back
	tok, vd := c.Enter(0, order("a"), 1)
	if vd.Blocked {
		t.Fatalf("after a call of figure 0 gave its token back: %+v, want a pass", vd)
	}
	toks[0] = tok
	answerAll(toks, "3")
	// 5 calls of 3 tokens: 15 taken from 5; the debt is capped at one
	// bucket, so 6 tokens to the next pass: 12 s.
	if vd, ok := blockedFor(c, 12); !ok {
		t.Fatalf("after 5 calls of 3 on a bucket of 5: %+v, want blocked for 12 s", vd)
	}
}

// TestCountOnHeaderBurstProperty: for any count, any burst and any instant
// (a bucket partly refilled since a call of a known figure), the calls sent
// at once that pass are exactly the whole tokens the bucket holds, and
// never more than count.
func TestCountOnHeaderBurstProperty(t *testing.T) {
	for _, count := range []float64{1, 2, 5, 17, 100, 1000} {
		for _, over := range []int{1, 2, 10} {
			for _, spent := range []float64{0, 0.5, 1} { // of the bucket, by a call before
				for _, since := range []float64{0, 0.37, 1} { // of the refill time, since
					c := compile(t, costRule(count, 10)).For("get-order")
					const at = 100.0
					want := int(count)
					if spent > 0 {
						first, vd := c.Enter(sec(at), order("a"), 1)
						if vd.Blocked {
							t.Fatal("a full bucket blocked")
						}
						used := int64(math.Max(1, math.Round(spent*count)))
						first.Answer(answer{"X-Tokens-Used": {strconv.FormatInt(used, 10)}})
						first.Exit(sec(at), 200)
						refilled := math.Floor(since*10/(10/count) + 1e-9)
						want = int(math.Min(count, count-float64(used)+refilled))
					}
					now := sec(at + since*10)
					var in []hotparam.Token
					for range int(count)*over + 3 {
						if tok, vd := c.Enter(now, order("a"), 1); !vd.Blocked {
							in = append(in, tok)
						}
					}
					passed := len(in)
					for i := range in {
						in[i].Cancel(now)
					}
					if passed != want {
						t.Fatalf("count %v, %v%% spent %v of the window before: %d of a burst passed, want %d", count, spent*100, since, passed, want)
					}
				}
			}
		}
	}
}

// TestCountOnDryRun: a dryRun rule counts after the answer and reports the
// would-be block, but never blocks.
func TestCountOnDryRun(t *testing.T) {
	r := lockoutRule(1, 60)
	r.DryRun = true
	c := compile(t, r).For("get-order")
	runAfter(t, c, []afterStep{
		{at: 0, value: "a", pass: true, status: 401},
		{at: 1, value: "a", pass: true, status: 401, dryRuns: 1},
		{at: 2, value: "a", pass: true, status: 200, dryRuns: 1},
	})
}

// TestCountOnItems: an item's value has its own threshold.
func TestCountOnItems(t *testing.T) {
	r := lockoutRule(1, 60)
	r.Items = []config.ParamItem{{Value: "office", Count: 3}, {Value: "blocked", Count: 0}}
	c := compile(t, r).For("get-order")
	runAfter(t, c, []afterStep{
		{at: 0, value: "a", pass: true, status: 401},
		{at: 0, value: "a", pass: false, retry: 60},
		{at: 0, value: "office", pass: true, status: 401},
		{at: 0, value: "office", pass: true, status: 401},
		{at: 0, value: "office", pass: true, status: 401},
		{at: 0, value: "office", pass: false, retry: 20},
		{at: 0, value: "blocked", pass: false},
	})
}

// TestCountOnCancelTakesNothing: a call let in and then not forwarded (a
// later guard blocked it, its client left) takes nothing.
func TestCountOnCancelTakesNothing(t *testing.T) {
	c := compile(t, lockoutRule(1, 60)).For("get-order")
	for range 3 {
		tok, vd := c.Enter(0, order("a"), 1)
		if vd.Blocked {
			t.Fatal("blocked")
		}
		tok.Cancel(0)
		tok.Exit(0, 401) // a no-op after Cancel
	}
	if _, vd := c.Enter(0, order("a"), 1); vd.Blocked {
		t.Fatal("cancelled calls took tokens")
	}
}

// TestCountOnCluster: a clusterMode rule lets a call in on the cluster's
// peek and charges the cluster after the answer; when Redis fails the
// charge, the local bucket keeps the debt.
func TestCountOnCluster(t *testing.T) {
	svc := &fakeCluster{ok: true}
	r := costRule(100, 10)
	r.ClusterMode = true
	c := compileCluster(t, svc, r)
	tok, vd := c.Enter(0, order("a"), 1)
	if vd.Blocked {
		t.Fatal("blocked")
	}
	tok.Answer(answer{"X-Tokens-Used": {"42"}})
	tok.Exit(0, 200)
	if svc.charged["a"] != 42 {
		t.Fatalf("cluster charged %v, want a: 42", svc.charged)
	}
	svc.ok = false
	if _, vd := c.Enter(0, order("a"), 1); !vd.Blocked {
		t.Fatal("the cluster's refusal did not block")
	}
	// Redis fails: the call falls back to the local bucket, which learnt
	// the 42 tokens, and the debt of an answer stays there.
	svc.err = errors.New("redis down")
	tok, vd = c.Enter(0, order("a"), 1)
	if vd.Blocked {
		t.Fatal("local fallback blocked a bucket with 58 tokens left")
	}
	tok.Answer(answer{"X-Tokens-Used": {"100"}})
	tok.Exit(0, 200)
	if vd, ok := blockedFor(c, 4.3); !ok {
		t.Fatalf("after 142 tokens of 100: %+v, want blocked 4.3 s", vd)
	}
}

// TestCountOnCalendarQuota: a month's tokens counted from the answer. A
// call is let in on the cluster's check of the period (never on
// AcquireQuota, which would count the call itself), with the period's
// figures for the RateLimit fields; the answer's figure, or acquireCount
// without one, is charged to the period, never to a rolling window; a
// refused period blocks until its reset; a cancelled call costs nothing.
// A failure lockout per day charges only the failures.
func TestCountOnCalendarQuota(t *testing.T) {
	const reset, month = 5 * time.Hour, 30 * 24 * time.Hour
	svc := &fakeCluster{ok: true, left: 900, reset: reset, period: month}
	r := costRule(1000, 1)
	r.ClusterMode, r.Window, r.Timezone = true, config.WindowMonth, "UTC"
	c := compileCluster(t, svc, r)
	tok, vd := c.Enter(sec(1), order("a"), 1)
	if vd.Blocked || !vd.HasQuota || vd.Quota.Remaining != 900 || vd.Quota.Reset != reset || vd.Quota.Window != month {
		t.Fatalf("pass: %+v, want passed with the period's figures (900 left, reset %v, window %v)", vd, reset, month)
	}
	tok.Answer(answer{"X-Tokens-Used": {"1834"}})
	tok.Exit(sec(1), 200)
	tok, _ = c.Enter(sec(2), order("a"), 1)
	tok.Exit(sec(2), 200) // no header: acquireCount
	tok, _ = c.Enter(sec(3), order("b"), 1)
	tok.Cancel(sec(3))
	if svc.quotaChecks != 3 || svc.quotaCalls != 0 || len(svc.charged) != 0 {
		t.Errorf("asked CheckQuota %d times, AcquireQuota %d, ChargeParam %v; want 3 checks and nothing else", svc.quotaChecks, svc.quotaCalls, svc.charged)
	}
	if want := map[string]int64{"a": 1835}; len(svc.quotaCharged) != 1 || svc.quotaCharged["a"] != 1835 {
		t.Errorf("charged %v to the period, want %v", svc.quotaCharged, want)
	}
	svc.ok, svc.left = false, 0
	if _, vd := c.Enter(sec(4), order("a"), 1); !vd.Blocked || vd.RetryAfter != reset || !vd.HasQuota || vd.Quota.Remaining != 0 {
		t.Errorf("overdrawn month: %+v, want blocked until the reset (%v) with 0 left", vd, reset)
	}

	svc = &fakeCluster{ok: true, left: 4, reset: reset, period: 24 * time.Hour}
	l := lockoutRule(5, 1)
	l.ClusterMode, l.Window, l.Timezone = true, config.WindowDay, "UTC"
	c = compileCluster(t, svc, l)
	for i, st := range []int{200, 401, 200, 401, 401} {
		tok, vd := c.Enter(sec(float64(10+i)), order("10.0.0.1"), 1)
		if vd.Blocked {
			t.Fatalf("login %d blocked: %+v", i+1, vd)
		}
		tok.Exit(sec(float64(10+i)), st)
	}
	if svc.quotaCharged["10.0.0.1"] != 3 {
		t.Errorf("a day's lockout charged %v, want 3 (the three 401s)", svc.quotaCharged)
	}
}

// A calendar quota counted from the answer, charged locally while Redis
// failed: once Redis answers again within the period, its check knows
// nothing of those charges, so until the reset a call must also fit this
// gateway's share, as an AcquireQuota rule's must. Before, a 30 s outage
// let a gateway spend its share alone and then the fleet's whole count.
func TestCountOnCalendarQuotaAfterOutage(t *testing.T) {
	down := errors.New("redis down")
	end := sec(3600) // the period's end
	svc := &fakeCluster{err: down, gateways: 2, period: 24 * time.Hour}
	at := func(now int64) int64 {
		svc.reset = time.Duration(end - now)
		if now >= end {
			svc.reset += 24 * time.Hour
		}
		return now
	}
	r := costRule(6, 1)
	r.ClusterMode, r.Window, r.Timezone = true, config.WindowDay, "UTC"
	c := compileCluster(t, svc, r)
	calls := func(now int64, n int) (passed int) {
		for i := range n {
			now := at(now + int64(i)*sec(0.001))
			tok, vd := c.Enter(now, order("k"), 1)
			if !vd.Blocked {
				passed++
				tok.Answer(answer{}) // no figure: acquireCount, 1
				tok.Exit(now, 200)
			}
		}
		return passed
	}
	if got := calls(sec(10), 5); got != 3 {
		t.Fatalf("Redis down: %d of 5 passed, want this gateway's share, 3 of 6", got)
	}
	svc.err, svc.ok, svc.left = nil, true, 6
	if got := calls(sec(40), 3); got != 0 {
		t.Errorf("Redis back within the period, share spent alone: %d of 3 passed, want 0 until the reset", got)
	}
	if got := calls(end+sec(1), 4); got != 4 {
		t.Errorf("Redis back, next period: %d of 4 passed, want 4 (Redis decides)", got)
	}
}

// TestParseCost: every byte of the figure is the upstream's, read
// defensively.
func TestParseCost(t *testing.T) {
	tests := []struct {
		vals []string
		want int64
		ok   bool
	}{
		{nil, 0, false},
		{[]string{"1834"}, 1834, true},
		{[]string{" 7\t"}, 7, true},
		{[]string{"0"}, 0, true},
		{[]string{""}, 0, false},
		{[]string{"-5"}, 0, false},
		{[]string{"+5"}, 0, false},
		{[]string{"1.5"}, 0, false},
		{[]string{"1e3"}, 0, false},
		{[]string{"0x10"}, 0, false},
		{[]string{"12 34"}, 0, false},
		{[]string{"１２"}, 0, false}, // full-width digits
		{[]string{"NaN"}, 0, false},
		{[]string{strings.Repeat("9", 100)}, 1 << 53, true},
		{[]string{"9007199254740993"}, 1 << 53, true},
		{[]string{"10", "1834"}, 1834, true}, // reported twice: the higher
		{[]string{"10, 20,x"}, 20, true},
		{[]string{"x", "5"}, 5, true},
		{[]string{",,"}, 0, false},
	}
	for _, tt := range tests {
		got, ok := hotparam.ParseCost(tt.vals)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseCost(%q) = %d, %v; want %d, %v", tt.vals, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseCost(f *testing.F) {
	for _, s := range []string{"1834", "-1", "99999999999999999999999", " 1 , 2 ", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := hotparam.ParseCost([]string{s})
		if got < 0 || got > 1<<53 || (!ok && got != 0) {
			t.Fatalf("ParseCost(%q) = %d, %v", s, got, ok)
		}
	})
}

// TestCountOnReportDebt: an operator's peek at a value in debt shows no
// token left, and the next one once the debt is paid.
func TestCountOnReportDebt(t *testing.T) {
	c := compile(t, costRule(100, 10)).For("get-order")
	runAfter(t, c, []afterStep{
		{at: 0, value: "a", pass: true, status: 200, cost: []string{"60"}},
		{at: 0, value: "a", pass: true, status: 200, cost: []string{"90"}}, // 50 in debt
	})
	st := c.Report(0, []string{"a"}, 0)[0].Values[0]
	if st.Remaining != 0 || (st.NextToken-time.Duration(sec(5.1))).Abs() > time.Millisecond {
		t.Fatalf("50 tokens in debt: %+v, want 0 left, the next in 5.1 s", st)
	}
}
