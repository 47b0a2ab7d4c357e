package limiter_test

import (
	"testing"
	"time"

	"sluice/limiter"
)

// A cluster rule of count 0 is refused in Redis (K < 1, nothing passes):
// its quota says limit 0 over the rule's interval, as before WholeCalls,
// not one call over ~31 years (the 1e-9 nudge made 0 a count under one).
func TestClusterCountZeroQuota(t *testing.T) {
	r := qps("r", 0)
	r.ClusterMode = true
	svc := &fakeCluster{ok: false, retry: 700 * time.Millisecond}
	c := limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: svc}).Checker("r", "default")
	v := c.EnterQuotas(new(limiter.Token), t0, "", 1, -1, nil)
	if !v.Blocked || !v.HasQuota {
		t.Fatalf("verdict %+v, want blocked with a quota", v)
	}
	if v.Quota.Limit != 0 || v.Quota.Window != time.Second {
		t.Errorf("quota limit %v window %v, want 0 over 1s", v.Quota.Limit, v.Quota.Window)
	}
}
