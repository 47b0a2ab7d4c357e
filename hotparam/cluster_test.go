package hotparam_test

import (
	"errors"
	"testing"

	"sluice/config"
	"sluice/hotparam"
	"sluice/limiter"
)

// fakeCluster is a TokenService that answers every value alike, and
// records the counts it was asked about.
type fakeCluster struct {
	ok       bool
	err      error
	gateways int
	counts   map[string]float64 // value -> count asked with
}

func (f *fakeCluster) AcquireParam(r *config.ParamRule, count float64, value string, n int64) (bool, error) {
	if f.counts != nil {
		f.counts[value] = count
	}
	return f.ok, f.err
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
			tok.Exit(now)
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
	tok.Exit(sec(1))
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
	for _, svc := range []*fakeCluster{{ok: true}, {ok: false}, {err: errors.New("down"), gateways: 2}} {
		c := compileCluster(t, svc, clusterRule(1e9, config.ThresholdGlobal, nil))
		v := one("7")
		now := sec(1)
		allocs := testing.AllocsPerRun(1000, func() {
			now++
			tok, _ := c.Enter(now, v, 1)
			tok.Exit(now)
		})
		if allocs != 0 {
			t.Errorf("ok=%v err=%v: %v allocs per call, want 0", svc.ok, svc.err, allocs)
		}
	}
}
