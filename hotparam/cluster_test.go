package hotparam_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"sluice/config"
	"sluice/hotparam"
	"sluice/limiter"
	"sluice/limiter/window"
)

// fakeCluster is a TokenService that answers every value alike, and
// records the counts it was asked about.
type fakeCluster struct {
	ok       bool
	err      error
	retry    time.Duration // a block's
	gateways int
	counts   map[string]float64 // value -> count asked with
	// a calendar quota's answer, and how often it was asked
	left          int64
	reset, period time.Duration
	quotaCalls    int
	charged       map[string]int64 // value -> tokens charged after answers
	// a calendar quota counted after the answer: checks asked, and what
	// was charged by value
	quotaChecks  int
	quotaCharged map[string]int64
	// a rolling window's pass asked to report: what it leaves, and
	// whether each call asked
	passLeft  int64
	passReset time.Duration
	reports   []bool
}

// AcquireParamLeft answers ok and err, a block's retry, and a reported
// pass's figures.
func (f *fakeCluster) AcquireParamLeft(r *config.ParamRule, count float64, value string, n int64, report bool) (bool, time.Duration, int64, time.Duration, error) {
	f.reports = append(f.reports, report)
	if f.counts != nil {
		f.counts[value] = count
	}
	switch {
	case !f.ok && f.err == nil:
		return false, f.retry, -1, 0, nil
	case f.ok && report:
		return true, 0, f.passLeft, f.passReset, nil
	}
	return f.ok, 0, -1, 0, f.err
}

func (f *fakeCluster) PeekParamLeft(r *config.ParamRule, count float64, value string, n int64, report bool) (bool, time.Duration, int64, time.Duration, error) {
	return f.AcquireParamLeft(r, count, value, n, report)
}

// ChargeParam records what was charged, by value.
func (f *fakeCluster) ChargeParam(r *config.ParamRule, count float64, value string, n int64) error {
	return f.record(&f.charged, value, n)
}

// record adds n to value's charges in m, unless the fake fails.
func (f *fakeCluster) record(m *map[string]int64, value string, n int64) error {
	if f.err == nil {
		if *m == nil {
			*m = map[string]int64{}
		}
		(*m)[value] += n
	}
	return f.err
}

// AcquireQuota answers as AcquireParam, with the quota figures in
// left, reset and period.
func (f *fakeCluster) AcquireQuota(r *config.ParamRule, count float64, value string, n int64) (bool, int64, time.Duration, time.Duration, error) {
	if f.counts != nil {
		f.counts[value] = count
	}
	f.quotaCalls++
	return f.ok, f.left, f.reset, f.period, f.err
}

// CheckQuota answers as AcquireQuota, counted apart.
func (f *fakeCluster) CheckQuota(r *config.ParamRule, count float64, value string, n int64) (bool, int64, time.Duration, time.Duration, error) {
	f.quotaChecks++
	return f.ok, f.left, f.reset, f.period, f.err
}

// ChargeQuota records what was charged to the period, by value.
func (f *fakeCluster) ChargeQuota(r *config.ParamRule, count float64, value string, n int64) error {
	return f.record(&f.quotaCharged, value, n)
}

func (f *fakeCluster) Gateways() int { return max(f.gateways, 1) }

func clusterRule(count float64, tt config.ThresholdType, fallback *bool) config.ParamRule {
	r := seedRule()
	r.Count, r.Items = count, []config.ParamItem{{Value: "102", Count: 4}}
	r.ClusterMode = true
	r.ClusterConfig = config.ClusterConfig{ThresholdType: tt, FallbackToLocalWhenFail: fallback}
	return r
}

func compileCluster(t testing.TB, ts hotparam.TokenService, rules ...config.ParamRule) *hotparam.Checker {
	t.Helper()
	return hotparam.CompileWith(defaulted(rules...), nil, hotparam.Options{Cluster: ts}).For("get-order")
}

// clusterPasses offers calls of value 1ms apart from now and counts those passed.
func clusterPasses(c *hotparam.Checker, now int64, value string, calls int) int {
	got := 0
	for i := range calls {
		tok, v := c.Enter(now+int64(i)*sec(0.001), order(value), 1)
		if !v.Blocked {
			got++
			tok.Exit(now, 200)
		}
	}
	return got
}

// A clusterMode rule's values are decided by the cluster while it answers;
// while Redis fails a global rule limits each value locally at this
// gateway's share, count / the gateways last seen (never below one), an
// avgLocal rule at count, and without fallback the value passes.
func TestClusterParamDecisions(t *testing.T) {
	no := false
	down := errors.New("redis down")
	tests := []struct {
		name     string
		svc      fakeCluster
		tt       config.ThresholdType
		fallback *bool
		count    float64
		value    string
		passes   int // of 20 calls in 20ms
	}{
		{"cluster passes", fakeCluster{ok: true}, config.ThresholdGlobal, nil, 10, "7", 20},
		{"cluster refuses", fakeCluster{ok: false}, config.ThresholdGlobal, nil, 10, "7", 0},
		{"down, global, 2 gateways", fakeCluster{err: down, gateways: 2}, config.ThresholdGlobal, nil, 10, "7", 5},
		{"down, global, 3 gateways", fakeCluster{err: down, gateways: 3}, config.ThresholdGlobal, nil, 10, "7", 3},
		{"down, global, item of 4, 2 gateways", fakeCluster{err: down, gateways: 2}, config.ThresholdGlobal, nil, 10, "102", 2},
		{"down, global, 20 gateways: one each", fakeCluster{err: down, gateways: 20}, config.ThresholdGlobal, nil, 10, "7", 1},
		{"down, avgLocal, 2 gateways: count", fakeCluster{err: down, gateways: 2}, config.ThresholdAvgLocal, nil, 10, "7", 10},
		{"down, no fallback: pass", fakeCluster{err: down, gateways: 2}, config.ThresholdGlobal, &no, 10, "7", 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := tt.svc
			svc.counts = map[string]float64{}
			c := compileCluster(t, &svc, clusterRule(tt.count, tt.tt, tt.fallback))
			if got := clusterPasses(c, sec(100), tt.value, 20); got != tt.passes {
				t.Errorf("passed %d of 20, want %d", got, tt.passes)
			}
			want := tt.count
			if tt.value == "102" {
				want = 4
			}
			if got := svc.counts[tt.value]; got != want {
				t.Errorf("asked the cluster with count %g, want %g", got, want)
			}
		})
	}
}

// A value the cluster refuses is blocked for reason param; a dryRun rule
// counts the would-be block and lets it pass.
func TestClusterParamBlockVerdict(t *testing.T) {
	svc := &fakeCluster{ok: false}
	c := compileCluster(t, svc, clusterRule(10, config.ThresholdGlobal, nil))
	_, v := c.Enter(sec(1), order("7"), 1)
	if !v.Blocked || v.Reason != limiter.ReasonParam {
		t.Errorf("verdict %+v, want blocked for param", v)
	}
	r := clusterRule(10, config.ThresholdGlobal, nil)
	r.DryRun = true
	c = compileCluster(t, svc, r)
	tok, v := c.Enter(sec(1), order("7"), 1)
	if v.Blocked || v.DryRun != 1 {
		t.Errorf("dryRun verdict %+v, want passed with one dry-run block", v)
	}
	tok.Exit(sec(1), 200)
}

// When Redis fails mid-second, the local fallback counts what the cluster
// passed on this gateway: 3 cluster passes of a share of 5 leave 2.
func TestClusterParamFallbackSeesClusterPasses(t *testing.T) {
	svc := &fakeCluster{ok: true, gateways: 2}
	c := compileCluster(t, svc, clusterRule(10, config.ThresholdGlobal, nil))
	if got := clusterPasses(c, sec(5), "7", 3); got != 3 {
		t.Fatalf("cluster passed %d of 3", got)
	}
	svc.ok, svc.err = false, errors.New("redis down")
	if got := clusterPasses(c, sec(5)+sec(0.01), "7", 10); got != 2 {
		t.Errorf("after 3 cluster passes, the fallback (share 5) passed %d, want 2", got)
	}
}

// The cluster path allocates nothing in hotparam for a value already
// tracked (what the TokenService costs is cluster's, see its benchmarks).
func TestClusterParamEnterDoesNotAllocate(t *testing.T) {
	for _, r := range []config.ParamRule{clusterRule(1e9, config.ThresholdGlobal, nil), quotaRule(1e9)} {
		for _, svc := range []*fakeCluster{{ok: true}, {ok: false}, {err: errors.New("down"), gateways: 2}} {
			c := compileCluster(t, svc, r)
			v := one("7")
			now := sec(1)
			allocs := testing.AllocsPerRun(1000, func() {
				now++
				tok, _ := c.Enter(now, v, 1)
				tok.Exit(now, 200)
			})
			if allocs != 0 {
				t.Errorf("window %s, ok=%v err=%v: %v allocs per call, want 0", r.Window, svc.ok, svc.err, allocs)
			}
		}
	}
}

// A cluster block of a value says when to retry, taken or (an after-answer
// rule) peeked at: the token service's answer is the verdict's RetryAfter.
func TestClusterBlockCarriesRetry(t *testing.T) {
	svc := &fakeCluster{ok: false, retry: 1500 * time.Millisecond}
	for _, r := range []config.ParamRule{clusterRule(5, config.ThresholdGlobal, nil), func() config.ParamRule {
		r := clusterRule(5, config.ThresholdGlobal, nil)
		r.CountOn, r.FailureStatuses = config.CountOnFailure, []string{"401"}
		return r
	}()} {
		c := compileCluster(t, svc, r)
		for _, value := range []struct {
			v     string
			count float64
		}{{"7", 5}, {"102", 4}} {
			// The value's quota, nothing left until the window frees: the
			// 429's RateLimit fields say so, with t as Retry-After.
			want := limiter.Quota{Policy: "get-order", Kind: limiter.ReasonParam, Limit: value.count, Window: time.Second,
				Reset: 1500 * time.Millisecond}
			var got quotaLog
			v := c.EnterQuotas(new(hotparam.Token), sec(1), order(value.v), 1, &got)
			if !v.Blocked || v.RetryAfter != 1500*time.Millisecond || !v.HasQuota || v.Quota != want {
				t.Errorf("countOn %q, value %s: cluster block %+v, want RetryAfter 1.5s and quota %+v", r.CountOn, value.v, v, want)
			}
			if want.Key = value.v; len(got) != 1 || got[0] != want {
				t.Errorf("countOn %q, value %s: the sink got %+v, want %+v", r.CountOn, value.v, got, want)
			}
		}
	}
}

// A pass Redis decided reports the value's quota as Redis gave it (what
// its window has left, and when its oldest pass leaves it), asked of
// Redis only by a caller that collects quotas. An avgLocal rule's limit is
// count x the live gateways, as Redis counts it.
func TestClusterPassReportsItsQuota(t *testing.T) {
	for _, c := range []struct {
		tt      config.ThresholdType
		countOn config.CountOn
		count   float64
		limit   float64
		window  time.Duration
	}{
		{config.ThresholdGlobal, "", 5, 5, time.Second},
		{config.ThresholdAvgLocal, "", 5, 15, time.Second},
		{config.ThresholdGlobal, config.CountOnFailure, 5, 5, time.Second}, // let in on a peek at the window
		// Under one call a second, Redis counts whole calls over the
		// fewest whole seconds that hold one: 0.5 is 1 per 2 s, 0.3 x 3
		// gateways is 0.9, 1 per 2 s.
		{config.ThresholdGlobal, "", 0.5, 1, 2 * time.Second},
		{config.ThresholdAvgLocal, "", 0.3, 1, 2 * time.Second},
	} {
		svc := &fakeCluster{ok: true, passLeft: 3, passReset: 800 * time.Millisecond, gateways: 3}
		r := clusterRule(c.count, c.tt, nil)
		if r.CountOn = c.countOn; c.countOn != "" {
			r.FailureStatuses = []string{"401"}
		}
		ch := compileCluster(t, svc, r)
		var got quotaLog
		var tok hotparam.Token
		v := ch.EnterQuotas(&tok, sec(1), order("7"), 1, &got)
		tok.Exit(sec(1), 200)
		want := limiter.Quota{Policy: "get-order", Kind: limiter.ReasonParam, Limit: c.limit, Window: c.window,
			Remaining: 3, Reset: 800 * time.Millisecond}
		if v.Blocked || v.Quota != want {
			t.Errorf("%s %s count %g: verdict %+v, want a pass with quota %+v", c.tt, c.countOn, c.count, v, want)
		}
		if want.Key = "7"; len(got) != 1 || got[0] != want {
			t.Errorf("%s %s: the sink got %+v, want %+v", c.tt, c.countOn, got, want)
		}
		tok, _ = ch.Enter(sec(2), order("7"), 1)
		tok.Exit(sec(2), 200)
		if !slices.Equal(svc.reports, []bool{true, false}) {
			t.Errorf("%s %s: asked Redis to report %v, want [true false] (only for a caller that collects quotas)", c.tt, c.countOn, svc.reports)
		}
	}
}

// quotaLog records the quotas a call's rules report, in order.
type quotaLog []limiter.Quota

func (l *quotaLog) Quota(q limiter.Quota) { *l = append(*l, q) }

// quotaRule is a daily quota of count per API key-like value (the seed
// rule's order id), item "102" at 4.
func quotaRule(count float64) config.ParamRule {
	r := clusterRule(count, config.ThresholdGlobal, nil)
	r.Window, r.Timezone = config.WindowDay, "America/New_York"
	return r
}

// A calendar quota is asked of the cluster's AcquireQuota (never of the
// rolling window's AcquireParam), with the value's count; its answer is
// the verdict: a pass reports what is left of the period and when it
// resets, with w the period's length (a DST day's 23 hours as they are); a
// block has RetryAfter and t at the reset.
func TestCalendarQuotaVerdicts(t *testing.T) {
	const reset, day = 5*time.Hour + 300*time.Millisecond, 23 * time.Hour
	svc := &fakeCluster{ok: true, left: 41, reset: reset, period: day, counts: map[string]float64{}}
	c := compileCluster(t, svc, quotaRule(50))
	tok, v := c.Enter(sec(1), order("102"), 1)
	if v.Blocked || !v.HasQuota {
		t.Fatalf("pass: verdict %+v, want passed with a quota", v)
	}
	tok.Exit(sec(1), 200)
	if svc.quotaCalls != 1 || svc.counts["102"] != 4 {
		t.Errorf("AcquireQuota asked %d times with count %g, want once with the item's 4", svc.quotaCalls, svc.counts["102"])
	}
	want := limiter.Quota{Policy: "get-order", Kind: limiter.ReasonParam, Limit: 4, Window: day, Remaining: 41, Reset: reset}
	if v.Quota != want {
		t.Errorf("pass quota %+v, want %+v", v.Quota, want)
	}
	svc.ok, svc.left = false, 0
	_, v = c.Enter(sec(2), order("7"), 1)
	if !v.Blocked || v.Reason != limiter.ReasonParam || v.RetryAfter != reset {
		t.Fatalf("block: verdict %+v, want blocked for param, RetryAfter %v", v, reset)
	}
	want = limiter.Quota{Policy: "get-order", Kind: limiter.ReasonParam, Limit: 50, Window: day, Remaining: 0, Reset: reset}
	if !v.HasQuota || v.Quota != want {
		t.Errorf("block quota %+v, want %+v", v.Quota, want)
	}
}

// While Redis fails, a calendar quota that falls back limits each value
// locally to its share of count per period, as Redis does: count 6 over 2
// gateways passes 3 at once and no more until the period's reset, with
// Retry-After and t counting down to it; at the reset the value has its 3
// again. Without fallback it passes. Before, the fallback was a bucket of
// count per nominal day: one more call every 8 hours, none at midnight.
func TestCalendarQuotaFallback(t *testing.T) {
	down := errors.New("redis down")
	end := sec(10) + int64(time.Hour) // the period's end, on the checker's timeline
	svc := &fakeCluster{err: down, gateways: 2, period: 24 * time.Hour}
	c := compileCluster(t, svc, quotaRule(6))
	at := func(now int64) int64 { // the service says how long the period has left
		svc.reset = time.Duration(end - now)
		if now >= end {
			svc.reset = time.Duration(end + int64(24*time.Hour) - now)
		}
		return now
	}
	for i := range 10 {
		now := at(sec(10) + int64(i)*sec(0.001))
		tok, v := c.Enter(now, order("7"), 1)
		if blocked := i >= 3; v.Blocked != blocked {
			t.Fatalf("call %d of the period: %+v, want blocked %v (6 a day over 2 gateways)", i, v, blocked)
		}
		if !v.Blocked {
			tok.Exit(now, 200)
			if v.Quota.Reset != svc.reset || v.Quota.Window != 24*time.Hour || v.Quota.Remaining != float64(2-i) {
				t.Errorf("pass %d: quota %+v, want %v left and t at the reset, %v", i, v.Quota, 2-i, svc.reset)
			}
		}
	}
	now := at(end - sec(1))
	if _, v := c.Enter(now, order("7"), 1); !v.Blocked || v.RetryAfter != time.Second || v.Quota.Reset != time.Second {
		t.Errorf("a second before the reset: %+v, want blocked, RetryAfter and t 1s", v)
	}
	// What /api/params shows of the value: nothing left until the reset,
	// then the period's 3 again, before any call.
	for _, tc := range []struct {
		at        int64
		remaining float64
		next      time.Duration
	}{{end - sec(2), 0, 2 * time.Second}, {end + sec(1), 3, 0}} {
		vs := c.Report(tc.at, []string{"7"}, 0)[0].Values[0]
		if vs.Remaining != tc.remaining || vs.NextToken != tc.next {
			t.Errorf("report at the reset %+v: %v left, next in %v; want %v, %v", time.Duration(tc.at-end), vs.Remaining, vs.NextToken, tc.remaining, tc.next)
		}
	}
	if got := clusterPasses(c, at(end), "7", 5); got != 3 {
		t.Errorf("at the reset: %d of 5 passed, want the period's 3", got)
	}
	// Redis answers again within that period, with room: the 3 passes made
	// alone were never counted there, so until the reset the value must
	// also fit this gateway's share, which it has spent; the next period
	// is Redis's alone.
	svc.err, svc.ok, svc.left = nil, true, 5
	end += int64(24 * time.Hour)
	if got := clusterPasses(c, at(end-sec(600)), "7", 3); got != 0 {
		t.Errorf("Redis back after this gateway spent its share alone: %d of 3 passed, want 0 until the reset", got)
	}
	if got := clusterPasses(c, at(end+sec(1)), "7", 5); got != 5 {
		t.Errorf("Redis back, next period: %d of 5 passed, want all 5 (Redis decides)", got)
	}
	svc.err, svc.ok = down, false
	end += int64(24 * time.Hour)
	// The calls Redis passed this period count in the fallback's; those
	// of the period before do not.
	svc.err, svc.ok, svc.left = nil, true, 4
	c = compileCluster(t, svc, quotaRule(6))
	if got := clusterPasses(c, at(end-sec(60)), "7", 2); got != 2 {
		t.Fatalf("Redis up: %d of 2 passed", got)
	}
	svc.err, svc.ok = down, false
	if got := clusterPasses(c, at(end-sec(30)), "7", 5); got != 1 {
		t.Errorf("Redis down after 2 cluster passes this period: %d of 5 passed, want 1 (a share of 3)", got)
	}
	if got := clusterPasses(c, at(end+sec(30)), "7", 5); got != 3 {
		t.Errorf("Redis down, next period: %d of 5 passed, want 3", got)
	}

	no := false
	r := quotaRule(6)
	r.ClusterConfig.FallbackToLocalWhenFail = &no
	c = compileCluster(t, svc, r)
	if got := clusterPasses(c, sec(10), "7", 10); got != 10 {
		t.Errorf("no fallback: passed %d of 10, want all", got)
	}
}

// peekingCluster is a fakeCluster that can peek at quotas.
type peekingCluster struct {
	fakeCluster
	left map[string]int64
}

func (p *peekingCluster) PeekQuota(_ context.Context, _ *config.ParamRule, count float64, value string) (int64, time.Duration, error) {
	if l, ok := p.left[value]; ok {
		return l, 3 * time.Hour, nil
	}
	return int64(count), 3 * time.Hour, nil
}

// Report shows a calendar quota's figures from the cluster (what is left of
// the period, and the time to its reset), for the top blocked values and
// for peeks, without taking anything.
func TestCalendarQuotaReport(t *testing.T) {
	svc := &peekingCluster{fakeCluster: fakeCluster{ok: false, reset: 3 * time.Hour, period: 24 * time.Hour}, left: map[string]int64{"7": 0}}
	c := compileCluster(t, svc, quotaRule(50))
	c.Enter(sec(1), order("7"), 1) // blocked by the cluster
	rep := c.Report(sec(2), nil, 10)
	if len(rep) != 1 || len(rep[0].Values) != 1 {
		t.Fatalf("top list %+v, want the blocked value", rep)
	}
	if v := rep[0].Values[0]; v.Value != "7" || v.Blocks != 1 || v.Remaining != 0 || v.NextToken != 3*time.Hour {
		t.Errorf("top value %+v, want 7 with 1 block, 0 left, reset in 3h", v)
	}
	calls := svc.quotaCalls
	rep = c.Report(sec(2), []string{"8", "102"}, 10)
	for i, want := range []float64{50, 4} {
		if v := rep[0].Values[i]; v.Remaining != want || v.NextToken != 3*time.Hour {
			t.Errorf("peek %s: %+v, want %g left, reset in 3h", v.Value, v, want)
		}
	}
	if svc.quotaCalls != calls {
		t.Errorf("Report took from the quota (%d AcquireQuota calls)", svc.quotaCalls-calls)
	}
}

// A call of more tokens than a value's window (or calendar period) in
// Redis holds never passes, as with a local bucket: the block names no
// moment (no Retry-After, no quota) and Redis is not asked. Redis told it
// to come back in a second, over and over (the cluster audit of
// 2026-12-07). An avgLocal window grows with the fleet, so it is asked.
func TestClusterCallOverTheWindowNeverPasses(t *testing.T) {
	for _, c := range []struct {
		name  string
		rule  config.ParamRule
		val   string
		n     int64
		asked bool
	}{
		{"rolling, 12 of 10", clusterRule(10, config.ThresholdGlobal, nil), "1", 12, false},
		{"rolling, 5 of item 102's 4", clusterRule(10, config.ThresholdGlobal, nil), "102", 5, false},
		{"rolling, the whole window", clusterRule(10, config.ThresholdGlobal, nil), "1", 10, true},
		{"calendar, 51 of 50", quotaRule(50), "1", 51, false},
		{"calendar, 50 of 50", quotaRule(50), "1", 50, true},
		{"avgLocal, 12 of 10 a gateway", clusterRule(10, config.ThresholdAvgLocal, nil), "1", 12, true},
	} {
		svc := &fakeCluster{ok: false, retry: time.Second, reset: time.Hour, period: 24 * time.Hour, counts: map[string]float64{}}
		_, v := compileCluster(t, svc, c.rule).Enter(sec(1), order(c.val), c.n)
		asked := len(svc.counts) > 0 || svc.quotaCalls > 0
		if !v.Blocked || asked != c.asked {
			t.Errorf("%s: blocked %v, Redis asked %v, want blocked, asked %v", c.name, v.Blocked, asked, c.asked)
		}
		if !c.asked && (v.RetryAfter != 0 || v.HasQuota) {
			t.Errorf("%s: RetryAfter %v, quota %v: a call that never passes names no moment", c.name, v.RetryAfter, v.HasQuota)
		}
	}
	// Swept: counts 0.5 to 100,000 over durationSec 1 s to an hour, the
	// window as the Redis script counts it (window.ClusterWholeCalls): its
	// whole window is asked of Redis, one token more never is.
	for _, count := range []float64{0.5, 0.9, 1, 1.5, 2, 3, 9.99, 10, 100, 1024, 2047.5, 4096, 99999.9, 100000} {
		for _, secs := range []int64{1, 60, 3600} {
			_, holds := window.ClusterWholeCalls(count, secs*int64(time.Second))
			for _, n := range []int64{int64(holds), int64(holds) + 1} {
				r := clusterRule(count, config.ThresholdGlobal, nil)
				r.DurationSec = secs
				svc := &fakeCluster{ok: false, retry: time.Second, counts: map[string]float64{}}
				compileCluster(t, svc, r).Enter(sec(1), order("1"), n)
				if asked := len(svc.counts) > 0; asked != (n <= int64(holds)) {
					t.Errorf("count %v per %d s, %d tokens of a window of %v: Redis asked %v", count, secs, n, holds, asked)
				}
			}
		}
	}
}
