package cluster_test

import (
	"context"
	"testing"
	"time"

	"sluice/cluster"
	"sluice/config"
)

// TestClusterFailureLockoutLift: a countOn failure lockout in the cluster
// (charges after the answer, peeks at entry) is shown by ReadParam and
// lifted by ForgetParam on every gateway.
func TestClusterFailureLockoutLift(t *testing.T) {
	url := redisURL(t)
	ns := namespace(t)
	const beat = 100 * time.Millisecond
	a := newService(t, cluster.Options{URL: url, Namespace: ns, Timeout: time.Second, Heartbeat: beat})
	b := newService(t, cluster.Options{URL: url, Namespace: ns, Timeout: time.Second, Heartbeat: beat})
	rule := paramRule(3, 900, config.ThresholdGlobal)
	rule.CountOn, rule.FailureStatuses = config.CountOnFailure, []string{"401"}
	ctx := context.Background()
	for range 3 {
		if err := a.ChargeParam(rule, 3, "mallory", 1); err != nil {
			t.Fatal(err)
		}
	}
	// overdraw too
	if err := a.ChargeParam(rule, 3, "mallory", 5); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*cluster.Service{a, b} {
		if ok, _, err := s.PeekParam(rule, 3, "mallory", 1); ok || err != nil {
			t.Fatalf("not locked out: %v", err)
		}
	}
	used, wait, err := a.ReadParam(ctx, rule, 3, "mallory")
	if err != nil || used < 3 || wait <= 0 {
		t.Fatalf("read: %v %v %v", used, wait, err)
	}
	if err := a.ForgetParam(ctx, rule, 3, "mallory"); err != nil {
		t.Fatal(err)
	}
	if used, _, _ := a.ReadParam(ctx, rule, 3, "mallory"); used != 0 {
		t.Errorf("after lift used %v", used)
	}
	if ok, _, _ := a.PeekParam(rule, 3, "mallory", 1); !ok {
		t.Error("a still refuses after lift")
	}
	waitFor(t, 5*time.Second, "b to pass the lifted value", func() bool {
		ok, _, _ := b.PeekParam(rule, 3, "mallory", 1)
		return ok
	})
}
