package cluster_test

import (
	"testing"
)

// TestBlockCacheMixedSizesRefuseOnlyWhatRedisWould: SPEC §3 (the same promise
// for the cluster window, §7): a call passes when the passes of the last
// statIntervalMs plus its tokens are at most count. Two routes of one
// resource may ask different acquireCounts of one cluster window. Here a
// window of 10/s is full (passes at 0, 100, ..., 900 ms); a call of 5 is
// refused until the 5th oldest pass leaves (1400 ms), then a call of 1 is
// refused until the oldest leaves (1000 ms). At 1000 ms + 1 µs the window
// holds 9 passes, so a call of 1 must pass (and Redis would pass it), but
// the block cache once merged the two refusals as "n >= 1 refused until 1400 ms"
// and refuses it locally, for 400 ms, with a Retry-After of ~400 ms.
// docs/cluster.md (Block cache): "This only ever refuses what Redis would
// refuse, except when an avgLocal gateway joins meanwhile."
func TestBlockCacheMixedSizesRefuseOnlyWhatRedisWould(t *testing.T) {
	clock := new(synthClock)
	s := synthService(t, namespace(t), clock)
	s.DisableLeases()
	rule := windowRule(10, 1000)
	const msUs = int64(1000)
	for i := range int64(10) {
		clock.us.Store(i * 100 * msUs)
		if ok, err := s.Acquire(rule, "k", 1); err != nil || !ok {
			t.Fatalf("pass %d: ok %v err %v", i, ok, err)
		}
	}
	clock.us.Store(950 * msUs)
	if ok, retry, err := s.AcquireRetry(rule, "k", 5); err != nil || ok {
		t.Fatalf("call of 5 at 950ms: ok %v err %v", ok, err)
	} else {
		t.Logf("call of 5 refused, retry %v", retry)
	}
	clock.us.Store(960 * msUs)
	if ok, retry, err := s.AcquireRetry(rule, "k", 1); err != nil || ok {
		t.Fatalf("call of 1 at 960ms: ok %v err %v", ok, err)
	} else {
		t.Logf("call of 1 refused, retry %v", retry)
	}
	clock.us.Store(1000*msUs + 1)
	ok, retry, err := s.AcquireRetry(rule, "k", 1)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Errorf("call of 1 at 1000ms+1µs refused (retry %v), but the window holds 9 of 10: want a pass", retry)
	}
}
