package ruleid_test

import (
	"reflect"
	"testing"

	"sluice/config"
	"sluice/internal/ruleid"
)

// Of skips exactly the fields named, nested ones by their path; every
// other field tells keys apart. (Which fields config skips, and that every
// other one counts, is config's TestRuleIDFollowsRuleIdentity.)
func TestOfSkips(t *testing.T) {
	yes := true
	r := config.FlowRule{Resource: "r", Count: 1, Line: 3}
	moved, fallback, count := r, r, r
	moved.Line = 40
	fallback.ClusterConfig.FallbackToLocalWhenFail = &yes
	count.Count = 2
	skip := []string{"Line", "ClusterConfig.FallbackToLocalWhenFail"}
	if ruleid.Of(moved, skip...) != ruleid.Of(r, skip...) || ruleid.Of(fallback, skip...) != ruleid.Of(r, skip...) {
		t.Error("a skipped field told two keys apart")
	}
	if ruleid.Of(count, skip...) == ruleid.Of(r, skip...) || ruleid.Of(moved) == ruleid.Of(r) {
		t.Error("a field not skipped left the key unchanged")
	}
}

// Keys compare values, not the bytes a value happens to print as: two
// pointers to equal values are equal, and strings cannot run into the
// next field.
func TestKeysCompareValues(t *testing.T) {
	a, b := true, true
	r1, r2 := config.FlowRule{Resource: "r"}, config.FlowRule{Resource: "r"}
	r1.ClusterConfig.FallbackToLocalWhenFail = &a
	r2.ClusterConfig.FallbackToLocalWhenFail = &b
	if ruleid.Of(r1, "Line") != ruleid.Of(r2, "Line") {
		t.Error("two pointers to true give two keys")
	}
	p1 := config.ParamRule{Resource: "a", Items: []config.ParamItem{{Value: "x y"}}}
	p2 := config.ParamRule{Resource: "a", Items: []config.ParamItem{{Value: "x"}, {Value: "y"}}}
	if ruleid.Of(p1) == ruleid.Of(p2) {
		t.Error(`items ["x y"] and ["x", "y"] share a key`)
	}
	if ruleid.Of(config.FlowRule{Resource: "r"}) == ruleid.Of(config.DegradeRule{Resource: "r"}) {
		t.Error("a flow rule and a degrade rule share a key")
	}
}

// Identical rules are matched by occurrence, and a compile that fails half
// way leaves the previous index as it was.
func TestIndexReuse(t *testing.T) {
	k, other := ruleid.Of(config.FlowRule{Resource: "a"}), ruleid.Of(config.FlowRule{Resource: "b"})
	var first ruleid.Index[string]
	for _, s := range []string{"a1", "a2"} {
		if _, ok := first.Reuse(nil, k); ok {
			t.Fatal("reused a state from no previous compile")
		}
		first.Add(k, s)
	}
	first.Add(other, "b1")

	for range 2 { // the second time after a "failed" first attempt
		var next ruleid.Index[string]
		var got []string
		for range 3 {
			s, ok := next.Reuse(&first, k)
			if !ok {
				s = "new"
			}
			next.Add(k, s)
			got = append(got, s)
		}
		if want := []string{"a1", "a2", "new"}; !reflect.DeepEqual(got, want) {
			t.Errorf("three identical rules got %q, want %q", got, want)
		}
	}
}
