package ruleid_test

import (
	"reflect"
	"testing"

	"sluice/config"
	"sluice/internal/ruleid"
)

// Every field but Line is part of a rule's identity, in each rule type: a
// field left out would let an edited rule keep the state of the old one.
func TestEveryFieldButLineCounts(t *testing.T) {
	yes := true
	rules := []any{
		config.FlowRule{Resource: "r", Count: 1, Line: 3},
		config.ParamRule{Resource: "r", Count: 1, Items: []config.ParamItem{{Value: "a", Count: 2}}, Line: 3},
		config.DegradeRule{Resource: "r", RetryTimeoutMs: 1, Line: 3},
	}
	for _, r := range rules {
		base := ruleid.Of(r)
		moved := reflect.New(reflect.TypeOf(r)).Elem()
		moved.Set(reflect.ValueOf(r))
		moved.FieldByName("Line").SetInt(40)
		if ruleid.Of(moved.Interface()) != base {
			t.Errorf("%T: a rule that only moved in the file got another key", r)
		}
		typ := reflect.TypeOf(r)
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Name == "Line" {
				continue
			}
			for _, edit := range edits(f.Type, &yes) {
				v := reflect.New(typ).Elem()
				v.Set(reflect.ValueOf(r))
				edit(v.Field(i))
				if ruleid.Of(v.Interface()) == base {
					t.Errorf("%T.%s: an edit left the key unchanged", r, f.Name)
				}
			}
		}
	}
}

// edits are changes to a field of type t, each of which must change the key.
func edits(t reflect.Type, yes *bool) []func(reflect.Value) {
	switch t.Kind() {
	case reflect.String:
		return []func(reflect.Value){func(v reflect.Value) { v.SetString(v.String() + "x") }}
	case reflect.Float64:
		return []func(reflect.Value){func(v reflect.Value) { v.SetFloat(v.Float() + 0.5) }}
	case reflect.Int, reflect.Int64:
		return []func(reflect.Value){func(v reflect.Value) { v.SetInt(v.Int() + 1) }}
	case reflect.Bool:
		return []func(reflect.Value){func(v reflect.Value) { v.SetBool(!v.Bool()) }}
	case reflect.Struct: // ClusterConfig, Source: each of their fields
		var out []func(reflect.Value)
		for i := range t.NumField() {
			for _, e := range edits(t.Field(i).Type, yes) {
				out = append(out, func(v reflect.Value) { e(v.Field(i)) })
			}
		}
		return out
	case reflect.Pointer: // *bool: set, and set to the other value
		return []func(reflect.Value){
			func(v reflect.Value) { v.Set(reflect.ValueOf(yes)) },
			func(v reflect.Value) { no := false; v.Set(reflect.ValueOf(&no)) },
		}
	case reflect.Slice: // items: one more, one fewer, one changed
		return []func(reflect.Value){
			func(v reflect.Value) { v.Set(reflect.Append(v, reflect.New(t.Elem()).Elem())) },
			func(v reflect.Value) { v.Set(v.Slice(0, 0)) },
			func(v reflect.Value) {
				c := reflect.MakeSlice(t, v.Len(), v.Len())
				reflect.Copy(c, v)
				c.Index(0).Field(0).SetString("b")
				v.Set(c)
			},
		}
	}
	panic("edits: no edit for " + t.String())
}

// Keys compare values, not the bytes a value happens to print as: two
// pointers to equal values are equal, and strings cannot run into the
// next field.
func TestKeysCompareValues(t *testing.T) {
	a, b := true, true
	r1, r2 := config.FlowRule{Resource: "r"}, config.FlowRule{Resource: "r"}
	r1.ClusterConfig.FallbackToLocalWhenFail = &a
	r2.ClusterConfig.FallbackToLocalWhenFail = &b
	if ruleid.Of(r1) != ruleid.Of(r2) {
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
