package cluster_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"sluice/cluster"
	"sluice/config"
	"sluice/hotparam"
)

type oneValue struct{ v [1]string }

func (r *oneValue) Values(config.Key) ([]string, bool) { return r.v[:], true }

func heapAfterGC() uint64 {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestReloadedParamRulesAreNotKeptAlive: a clusterMode param rule is
// handed to the Service by pointer, and the Service's spec cache keeps
// that pointer until it holds 4096 specs. It pointed into hotparam's
// compiled rule, so every reload that edited such a rule left the old
// rule's whole value table alive (here six tables of 6,000 values, 5.8
// MB): maxTrackedValues no longer bounded a gateway's memory. Dropping a
// snapshot now frees its tables; the Service keeps only the rules'
// settings.
func TestReloadedParamRulesAreNotKeptAlive(t *testing.T) {
	url := redisURL(t)
	svc, err := cluster.New(cluster.Options{URL: url, Namespace: namespace(t), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			svc.Close()
		}
	}()
	base := config.ParamRule{
		Resource: "orders", Param: config.Key{{Kind: config.SourceHeader, Name: "X-Key"}},
		Grade: config.GradeQPS, DurationSec: 60, ControlBehavior: config.BehaviorReject,
		MaxTrackedValues: 100000, ClusterMode: true,
		ClusterConfig: config.ClusterConfig{ThresholdType: config.ThresholdGlobal},
	}
	const versions, values = 6, 6000
	now := time.Now().UnixNano()
	for v := range versions {
		r := base
		r.Count = float64(100 + v) // an edit: a new rule at each "reload"
		set := hotparam.CompileWith([]config.ParamRule{r}, nil, hotparam.Options{Cluster: svc})
		c := set.For("orders")
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				val := &oneValue{}
				for i := g; i < values; i += 8 {
					val.v[0] = fmt.Sprintf("v%d-key-%08d", v, i)
					tok, vd := c.Enter(now, val, 1)
					if !vd.Blocked {
						tok.Exit(now, 200)
					}
				}
			}()
		}
		wg.Wait()
		if got := set.Tracked("orders"); got != values {
			t.Fatalf("version %d tracks %d values, want %d", v, got, values)
		}
	}
	// Every Set is dropped: only the Service can hold them now.
	withService := heapAfterGC()
	svc.Close()
	closed = true
	svc = nil
	without := heapAfterGC()
	held := int64(withService) - int64(without)
	t.Logf("heap with the Service %d B, after it is dropped %d B: the Service held %d B", withService, without, held)
	if held > 2<<20 {
		t.Errorf("the cluster Service keeps %d MB of dropped snapshots' param rules alive (%d rules x %d tracked values)",
			held>>20, versions, values)
	}
}
