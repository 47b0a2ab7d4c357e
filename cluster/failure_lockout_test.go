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

// TestHeldPassRefusalKeptBriefly: a countOn failure rule's passes are held
// while their calls are in flight, and a success gives its pass back at
// once in Redis. A gateway that refused the value meanwhile noted the
// refusal until the window's oldest pass would leave it, 15 minutes
// later, and went on refusing a user whose place a success on another
// gateway had freed. Now such a refusal is kept a second at most.
func TestHeldPassRefusalKeptBriefly(t *testing.T) {
	url := redisURL(t)
	ns := namespace(t)
	clock := new(synthClock)
	opts := cluster.Options{URL: url, Namespace: ns, Timeout: time.Second, Heartbeat: time.Hour}
	a, b := newService(t, opts), newService(t, opts)
	a.SetClock(clock.now)
	b.SetClock(clock.now)
	rule := paramRule(3, 900, config.ThresholdGlobal)
	rule.CountOn, rule.FailureStatuses = config.CountOnFailure, []string{"401"}
	var stamps []int64
	for range 3 {
		ok, _, _, _, stamp, err := a.AcquireParamStamp(rule, 3, "mallory", 1, false)
		if !ok || err != nil {
			t.Fatalf("a guess of three was refused: %v", err)
		}
		stamps = append(stamps, stamp)
	}
	ok, first, _, _, _, _ := b.AcquireParamStamp(rule, 3, "mallory", 1, false)
	if ok {
		t.Fatal("a fourth guess in flight was let in")
	}
	// The refusal answered from the note says the same wait as Redis's:
	// it said the note's second (Retry-After 60, 1, 1, 59, ...), and a
	// client that waited that long was refused again.
	if ok, again, _, _, _, _ := b.AcquireParamStamp(rule, 3, "mallory", 1, false); ok || again != first || first < 899*time.Second {
		t.Fatalf("refused again at once: wait %v, then %v; want the window's %v twice", first, again, first)
	}
	// A success on gateway a: its pass back in Redis at once (the peek
	// takes the give-back along, as hotparam's returnPass does).
	a.GiveBackParam(rule, 3, "mallory", 1, stamps[0])
	if ok, _, _, _, err := a.PeekParamLeft(rule, 3, "mallory", 1, false); !ok || err != nil {
		t.Fatalf("gateway a after its give-back: %v, %v", ok, err)
	}
	clock.us.Add(1_000_000)
	if ok, _, _, _, _, err := b.AcquireParamStamp(rule, 3, "mallory", 1, false); !ok || err != nil {
		t.Fatalf("a second after a success on gateway a, gateway b still refuses the freed place (%v)", err)
	}
}
