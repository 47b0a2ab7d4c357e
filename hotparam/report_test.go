package hotparam_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice/config"
	"sluice/hotparam"
)

// flood offers calls of value at now and returns how many passed.
func flood(c *hotparam.Checker, now int64, value string, calls int) int {
	passed := 0
	for range calls {
		tok, v := c.Enter(now, order(value), 1)
		if !v.Blocked {
			passed++
			tok.Exit(now, 200)
		}
	}
	return passed
}

// The top list names the values with the most blocks in the last minute,
// most first, with their passes and what is left; values never blocked
// are not in it, and a minute and more later no value is.
func TestReportTopBlocked(t *testing.T) {
	c := compile(t, seedRule()).For("get-order")
	now := sec(100)
	flood(c, now, "a", 12) // 2 pass, 10 blocked
	flood(c, now, "b", 22) // 2 pass, 20 blocked
	flood(c, now, "c", 7)  // 2 pass, 5 blocked
	flood(c, now, "calm", 1)
	flood(c, now, "102", 9) // an item of 4: 4 pass, 5 blocked

	rs := c.Report(now, nil, 3)
	if len(rs) != 1 || rs[0].Ord != 0 || rs[0].Rule.Count != 2 || rs[0].Tracked != 5 {
		t.Fatalf("report: %+v", rs)
	}
	want := []hotparam.ValueState{
		{Value: "b", Tracked: true, Applies: true, Passes: 2, Blocks: 20, Remaining: 0, NextToken: 500 * time.Millisecond, Count: 2},
		{Value: "a", Tracked: true, Applies: true, Passes: 2, Blocks: 10, Remaining: 0, NextToken: 500 * time.Millisecond, Count: 2},
		{Value: "102", Tracked: true, Applies: true, Passes: 4, Blocks: 5, Remaining: 0, NextToken: 250 * time.Millisecond, Count: 4},
	}
	got := rs[0].Values
	if len(got) != len(want) {
		t.Fatalf("top 3: %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("top %d: %+v\nwant %+v", i, got[i], want[i])
		}
	}
	// Half a second on, a's bucket holds one token again.
	if got := c.Report(now+sec(0.5), []string{"a"}, 0)[0].Values[0]; got.Remaining != 1 || got.NextToken != 500*time.Millisecond {
		t.Errorf("a half a second later: %+v, want 1 token left, the next in 0.5s", got)
	}
	if got := c.Report(now+sec(121), nil, 100)[0].Values; len(got) != 0 {
		t.Errorf("two minutes later the top list still has %+v", got)
	}
}

// A peek reports a value's figures without taking a token, tracking it or
// making it recent: after any number of peeks the value still gets its
// full count.
func TestReportPeekTakesNothing(t *testing.T) {
	r := seedRule()
	r.MaxTrackedValues = 1
	c := compile(t, r).For("get-order")
	now := sec(1)
	for range 1000 {
		vs := c.Report(now, []string{"fresh", "103"}, 0)[0].Values
		if vs[0].Tracked || vs[0].Remaining != 2 || vs[0].NextToken != 0 || vs[1].Remaining != 10 || vs[1].Count != 10 {
			t.Fatalf("peek of untracked values: %+v", vs)
		}
	}
	if n := c.Report(now, nil, 100)[0].Tracked; n != 0 {
		t.Fatalf("peeks tracked %d values", n)
	}
	if got := flood(c, now, "fresh", 5); got != 2 {
		t.Fatalf("after 1000 peeks, %d of 5 calls passed; want the full count, 2", got)
	}
	for range 1000 {
		if vs := c.Report(now, []string{"fresh"}, 0)[0].Values; !vs[0].Tracked || vs[0].Passes != 2 || vs[0].Blocks != 3 || vs[0].Remaining != 0 {
			t.Fatalf("peek of a tracked value: %+v", vs)
		}
	}
	if got := flood(c, now+sec(1), "fresh", 5); got != 2 {
		t.Fatalf("a second later, after 1000 more peeks, %d of 5 passed; want 2", got)
	}
}

// TestReportEmptyValueDoesNotApply: a request whose parameter is empty
// passes the rule untouched (SPEC §3 Sources), so the report of the
// value "" says the rule does not apply to it; it said it did.
func TestReportEmptyValueDoesNotApply(t *testing.T) {
	c := compile(t, seedRule()).For("get-order")
	vs := c.Report(sec(1), []string{"", "a"}, 0)[0].Values
	if vs[0].Applies || !vs[1].Applies {
		t.Errorf(`applies to "": %v, to "a": %v; want false, true`, vs[0].Applies, vs[1].Applies)
	}
}

// Forget lifts a blocked value in every rule of the resource at once; other
// values keep their state.
func TestForgetLiftsAValue(t *testing.T) {
	perMinute := seedRule()
	perMinute.Count, perMinute.DurationSec, perMinute.Items = 3, 60, nil
	c := compile(t, seedRule(), perMinute).For("get-order")
	now := sec(10)
	flood(c, now, "x", 5)
	flood(c, now, "y", 5)
	if got := flood(c, now, "x", 1); got != 0 {
		t.Fatal("x not blocked before the lift")
	}
	n, err := c.Forget(context.Background(), "x")
	if n != 2 || err != nil {
		t.Fatalf("Forget: %d rules, %v; want 2, nil", n, err)
	}
	if got := flood(c, now, "x", 5); got != 2 {
		t.Fatalf("after the lift %d of 5 passed; want 2, a fresh value's count", got)
	}
	if got := flood(c, now, "y", 1); got != 0 {
		t.Fatal("lifting x lifted y too")
	}
	if n, _ := c.Forget(context.Background(), "never-seen"); n != 0 {
		t.Fatalf("Forget of an untracked value: %d rules", n)
	}
}

// A value longer than internal/lru keeps whole is listed by its prefix
// and digest, asked for by its whole value, and lifted by what is listed.
func TestReportLongValue(t *testing.T) {
	c := compile(t, seedRule()).For("get-order")
	long := strings.Repeat("é", 100)
	flood(c, 0, long, 4)
	top := c.Report(0, nil, 10)[0].Values
	if len(top) != 1 || !top[0].Digest || !strings.HasPrefix(top[0].Value, strings.Repeat("é", 24)+"…#") || top[0].Blocks != 2 {
		t.Fatalf("top: %+v", top)
	}
	if vs := c.Report(0, []string{long}, 0)[0].Values[0]; vs.Value != long || !vs.Tracked || vs.Blocks != 2 {
		t.Fatalf("peek by the whole value: %+v", vs)
	}
	if n, _ := c.Forget(context.Background(), top[0].Value); n != 1 {
		t.Fatalf("Forget by the listed name: %d rules", n)
	}
	if got := flood(c, 0, long, 3); got != 2 {
		t.Fatalf("after the lift by its listed name %d of 3 passed, want 2", got)
	}
}

// Each kind reports what a call would find: tokens, queue room, calls that
// may still start; a value the rule's match leaves out does not apply.
func TestReportKinds(t *testing.T) {
	thr := throttleRule(10, 500) // 10/s, a queue of 500ms
	conc := inFlightRule()
	conc.Count = 2
	matched := seedRule()
	matched.Match = config.ParamMatch{Strategy: "prefix", Pattern: "u-"}
	for _, c := range []struct {
		name string
		rule config.ParamRule
		do   func(c *hotparam.Checker)
		want hotparam.ValueState
	}{
		{"throttle", thr, func(c *hotparam.Checker) { flood(c, 0, "v", 3) },
			hotparam.ValueState{Passes: 3, Remaining: 3, NextToken: 300 * time.Millisecond, Count: 10}},
		{"concurrency", conc, func(c *hotparam.Checker) { c.Enter(0, order("v"), 1) },
			hotparam.ValueState{Passes: 1, Remaining: 1, InFlight: 1, Count: 2}},
		{"outside the match", matched, func(*hotparam.Checker) {},
			hotparam.ValueState{Remaining: 2, Count: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := compile(t, c.rule).For("get-order")
			c.do(ch)
			got := ch.Report(0, []string{"v"}, 0)[0].Values[0]
			got.Value, got.Tracked, got.Applies, got.Digest = "", false, false, false
			if got != c.want || math.IsNaN(got.Remaining) {
				t.Errorf("%+v\nwant %+v", got, c.want)
			}
		})
	}
}

// forgettingCluster is a fakeCluster that also forgets values.
type forgettingCluster struct {
	fakeCluster
	forgot []string // "value count"
	err    error
}

func (f *forgettingCluster) ForgetParam(_ context.Context, _ *config.ParamRule, count float64, value string) error {
	f.forgot = append(f.forgot, value+" "+strconv.FormatFloat(count, 'g', -1, 64))
	return f.err
}

// A clusterMode rule's value is forgotten in the cluster too, under the
// count that applies to it (an item's window is its own); a cluster that
// fails is reported, and the local state is forgotten all the same.
func TestForgetClusterValue(t *testing.T) {
	fc := &forgettingCluster{fakeCluster: fakeCluster{ok: true}}
	c := compileCluster(t, fc, clusterRule(5, config.ThresholdGlobal, nil))
	c.Enter(0, order("102"), 1)
	if n, err := c.Forget(context.Background(), "102"); n != 1 || err != nil {
		t.Fatalf("Forget: %d, %v", n, err)
	}
	fc.err = errors.New("redis down")
	if _, err := c.Forget(context.Background(), "7"); err == nil {
		t.Fatal("a failing cluster was not reported")
	}
	if want := []string{"102 4", "7 5"}; !slices.Equal(fc.forgot, want) {
		t.Fatalf("forgot %q, want %q", fc.forgot, want)
	}
}

// Counting a value's passes and blocks for the report costs the check no
// allocation, on a block as on a pass.
func TestCountingBlocksDoesNotAllocate(t *testing.T) {
	c := compile(t, seedRule()).For("get-order")
	v := one("7")
	flood(c, 0, "7", 3)
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 1000
		if _, vd := c.Enter(now, v, 1); !vd.Blocked {
			t.Fatal("passed")
		}
	})
	if allocs > 0 {
		t.Errorf("a blocked call of a tracked value: %v allocs, want 0", allocs)
	}
	if got := c.Report(now, []string{"7"}, 0)[0].Values[0].Blocks; got < 1000 {
		t.Errorf("%v blocks counted, want over 1000", got)
	}
}

// readingCluster is a fakeCluster whose windows hold used tokens each.
type readingCluster struct {
	fakeCluster
	used float64
	err  error
}

func (f *readingCluster) ReadParam(_ context.Context, _ *config.ParamRule, _ float64, _ string) (float64, time.Duration, error) {
	return f.used, 7 * time.Second, f.err
}

// A clusterMode rule reports the cluster's figures when the cluster
// answers (an item's count for its value, avgLocal's count per gateway),
// else this gateway's own: its fallback's, at its share of a global count.
func TestReportClusterFigures(t *testing.T) {
	rc := &readingCluster{fakeCluster: fakeCluster{ok: true, gateways: 3}, used: 3}
	c := compileCluster(t, rc, clusterRule(5, config.ThresholdGlobal, nil))
	vs := c.Report(0, []string{"7", "102"}, 0)[0].Values
	if !vs[0].Shared || vs[0].Remaining != 2 || vs[0].NextToken != 7*time.Second || vs[1].Remaining != 1 {
		t.Errorf("global: %+v", vs)
	}
	avg := compileCluster(t, rc, clusterRule(5, config.ThresholdAvgLocal, nil))
	if v := avg.Report(0, []string{"7"}, 0)[0].Values[0]; v.Remaining != 12 {
		t.Errorf("avgLocal of 5 on 3 gateways, 3 used: %+v, want 12 left", v)
	}
	rc.err = errors.New("redis down")
	if v := c.Report(0, []string{"7"}, 0)[0].Values[0]; v.Shared || v.Remaining != 1 {
		t.Errorf("without the cluster: %+v, want the local fallback's figures (its share of 5 on 3 gateways: 1 left)", v)
	}
}
