package hotparam_test

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"sluice/config"
	"sluice/hotparam"
)

// returningCluster is a fakeCluster that can give tokens back: it passes
// every value but those in block, stamps each pass, and records what is
// given back.
type returningCluster struct {
	*fakeCluster
	block  map[string]bool
	stamps int64
	back   []givenBack
}

type givenBack struct {
	value        string
	count        float64
	n, stamp     int64
	ruleResource string
}

var _ hotparam.TokenReturner = (*returningCluster)(nil)

func (f *returningCluster) AcquireParamStamp(r *config.ParamRule, count float64, value string, n int64, report bool) (bool, time.Duration, int64, time.Duration, int64, error) {
	if f.block[value] {
		return false, time.Second, -1, 0, 0, nil
	}
	f.stamps++
	return true, 0, -1, 0, f.stamps, nil
}

func (f *returningCluster) GiveBackParam(r *config.ParamRule, count float64, value string, n, stamp int64) {
	f.back = append(f.back, givenBack{value: value, count: count, n: n, stamp: stamp, ruleResource: r.Resource})
}

// A request whose second value the cluster refuses gives the first
// value's pass back, with its stamp, the count it was asked with and the
// call's tokens; a call that goes gives nothing back, and one a later
// guard stops (Cancel) gives back each value's pass.
func TestClusterValuesOfBlockedCallAreGivenBack(t *testing.T) {
	svc := &returningCluster{fakeCluster: &fakeCluster{}, block: map[string]bool{"b": true}}
	c := compileCluster(t, svc, clusterRule(5, config.ThresholdGlobal, nil))
	buf := []byte("a")
	val := many{orderID: {string(buf), "b"}}
	if _, v := c.Enter(sec(1), val, 2); !v.Blocked {
		t.Fatalf("a+b: %+v, want blocked on b", v)
	}
	want := []givenBack{{value: "a", count: 5, n: 2, stamp: 1, ruleResource: "get-order"}}
	if len(svc.back) != 1 || svc.back[0] != want[0] {
		t.Fatalf("given back %+v, want %+v", svc.back, want)
	}

	svc.back = nil
	tok, v := c.Enter(sec(2), many{orderID: {"a", "102"}}, 1)
	if v.Blocked {
		t.Fatalf("a+102 blocked: %+v", v)
	}
	tok.Exit(sec(2), 200)
	if len(svc.back) != 0 {
		t.Fatalf("a forwarded call gave back %+v", svc.back)
	}

	tok, _ = c.Enter(sec(3), many{orderID: {"a", "102"}}, 1)
	tok.Cancel(sec(3))
	tok.Cancel(sec(3)) // once only
	if len(svc.back) != 2 || svc.back[0].value != "a" || svc.back[1].value != "102" || svc.back[1].count != 4 {
		t.Fatalf("a cancelled call gave back %+v, want a (count 5) and 102 (its item's count 4)", svc.back)
	}
}

// A value given back is the value the cluster was asked about, though the
// caller's buffer changed since, short or long.
func TestClusterValueGivenBackOutlivesTheCallersBuffer(t *testing.T) {
	for _, value := range []string{"a1", strings.Repeat("v", 100)} {
		svc := &returningCluster{fakeCluster: &fakeCluster{}, block: map[string]bool{"b": true}}
		c := compileCluster(t, svc, clusterRule(5, config.ThresholdGlobal, nil))
		buf := []byte(value)
		vals := []string{unsafeString(buf), "b"}
		tok, v := c.Enter(sec(1), many{orderID: vals[:1]}, 1)
		if v.Blocked {
			t.Fatal("blocked")
		}
		for i := range buf {
			buf[i] = 'x' // the caller reuses its buffer
		}
		tok.Cancel(sec(1))
		if len(svc.back) != 1 || svc.back[0].value != value {
			t.Fatalf("gave back %+v, want value %.10s…", svc.back, value)
		}
	}
}

// Passing and ending a value through a TokenReturner allocates nothing,
// and neither does giving it back.
func TestClusterGiveBackDoesNotAllocate(t *testing.T) {
	svc := &returningCluster{fakeCluster: &fakeCluster{}, back: make([]givenBack, 0, 4096)}
	c := compileCluster(t, svc, clusterRule(1e9, config.ThresholdGlobal, nil))
	v := one("7")
	now := sec(1)
	allocs := testing.AllocsPerRun(1000, func() {
		now++
		tok, _ := c.Enter(now, v, 1)
		if now%2 == 0 {
			tok.Exit(now, 200)
		} else {
			tok.Cancel(now)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocs per call, want 0", allocs)
	}
}

// unsafeString is b as a string that changes with b, as a reused request
// buffer does.
func unsafeString(b []byte) string { return unsafe.String(&b[0], len(b)) }
