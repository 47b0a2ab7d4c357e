package limiter_test

import (
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter"
)

// A global cluster rule of count 0 passes nothing (K < 1 in Redis): like a
// local rule of count 0, its block names no moment, no quota and no
// Retry-After (not one call over ~31 years, which the 1e-9 nudge of
// ClusterWholeCalls would make of 0 as a count under one), and Redis is
// not asked. An avgLocal one is asked, and its quota says limit 0 over the
// rule's interval.
func TestClusterCountZeroQuota(t *testing.T) {
	r := qps("r", 0)
	r.ClusterMode = true
	svc := &fakeCluster{ok: false, retry: 700 * time.Millisecond}
	c := limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: svc}).Checker("r", "default")
	v := c.EnterQuotas(new(limiter.Token), t0, "", 1, -1, nil)
	if !v.Blocked || v.HasQuota || v.RetryAfter >= 0 || len(svc.keys) > 0 {
		t.Fatalf("verdict %+v, Redis asked %d times: want blocked, no quota, no moment, Redis not asked", v, len(svc.keys))
	}
	r.ClusterConfig.ThresholdType = config.ThresholdAvgLocal
	c = limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: svc}).Checker("r", "default")
	v = c.EnterQuotas(new(limiter.Token), t0, "", 1, -1, nil)
	if !v.Blocked || !v.HasQuota {
		t.Fatalf("avgLocal: verdict %+v, want blocked with a quota", v)
	}
	if v.Quota.Limit != 0 || v.Quota.Window != time.Second {
		t.Errorf("avgLocal: quota limit %v window %v, want 0 over 1s", v.Quota.Limit, v.Quota.Window)
	}
}
