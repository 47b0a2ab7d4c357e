package limiter_test

import (
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter"
)

// returningCluster is a fakeCluster that can give tokens back: it stamps
// each pass and records what is given back.
type returningCluster struct {
	*fakeCluster
	stamps int64
	back   []flowBack
}

type flowBack struct {
	resource, key string
	n, stamp      int64
}

var _ limiter.TokenReturner = (*returningCluster)(nil)

func (f *returningCluster) AcquireFlowStamp(r *config.FlowRule, key string, n int64, report bool) (bool, time.Duration, int64, time.Duration, int64, error) {
	ok, retry, left, reset, err := f.AcquireFlow(r, key, n, report)
	if !ok || err != nil {
		return ok, retry, left, reset, 0, err
	}
	f.stamps++
	return ok, retry, left, reset, f.stamps, nil
}

func (f *returningCluster) GiveBackFlow(r *config.FlowRule, key string, n, stamp int64) {
	f.back = append(f.back, flowBack{r.Resource, key, n, stamp})
}

// A call a clusterMode rule passed and a later rule of the same checker
// blocks gives its cluster tokens back; so does a passed call a later
// guard stops (Cancel), once; a call that goes gives nothing back.
func TestClusterPassOfBlockedCallIsGivenBack(t *testing.T) {
	for _, fallback := range []bool{true, false} { // with and without the local mirror window
		shared := qps("r", 100)
		shared.ClusterMode = true
		shared.ClusterConfig.FallbackToLocalWhenFail = &fallback
		perOrigin := app(qps("r", 2), "a")
		svc := &returningCluster{fakeCluster: &fakeCluster{ok: true}}
		c := limiter.Compile(defaulted(shared, perOrigin), nil, limiter.Options{Cluster: svc}).Checker("r", "default")

		tok, v := c.Enter(t0, "a", 2)
		if v.Blocked {
			t.Fatalf("fallback %v: first call blocked", fallback)
		}
		tok.Exit(t0+1, false)
		if len(svc.back) != 0 {
			t.Fatalf("fallback %v: a forwarded call gave back %+v", fallback, svc.back)
		}
		if _, v := c.Enter(t0+2, "a", 2); !v.Blocked {
			t.Fatalf("fallback %v: second call of origin a passed its rule of 2", fallback)
		}
		if want := (flowBack{"r", "", 2, 2}); len(svc.back) != 1 || svc.back[0] != want {
			t.Fatalf("fallback %v: blocked call gave back %+v, want %+v", fallback, svc.back, want)
		}

		svc.back = nil
		tok, v = c.Enter(t0+3, "b", 1)
		if v.Blocked {
			t.Fatalf("fallback %v: origin b blocked", fallback)
		}
		tok.Cancel(t0+4, limiter.ReasonParam)
		tok.Cancel(t0+4, limiter.ReasonParam)
		if want := (flowBack{"r", "", 1, 3}); len(svc.back) != 1 || svc.back[0] != want {
			t.Fatalf("fallback %v: cancelled call gave back %+v, want %+v", fallback, svc.back, want)
		}
	}
}

// Entering and ending calls through a TokenReturner allocates nothing,
// given back or not.
func TestClusterGiveBackDoesNotAllocate(t *testing.T) {
	r := qps("r", 1e9)
	r.ClusterMode = true
	svc := &returningCluster{fakeCluster: &fakeCluster{ok: true, keys: make([]string, 0, 4096), reports: make([]bool, 0, 4096)},
		back: make([]flowBack, 0, 4096)}
	c := limiter.Compile(defaulted(r), nil, limiter.Options{Cluster: svc}).Checker("r", "default")
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		now++
		tok, _ := c.Enter(now, "", 1)
		if now%2 == 0 {
			tok.Exit(now, false)
		} else {
			tok.Cancel(now, limiter.ReasonNone)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocs per call, want 0", allocs)
	}
}
