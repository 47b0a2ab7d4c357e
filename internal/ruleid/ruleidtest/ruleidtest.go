// Package ruleidtest edits one field of a rule at a time, for the tests
// that check which fields are part of a rule's identity (config's table,
// the local keys of internal/ruleid and cluster's Redis windows).
package ruleidtest

import (
	"reflect"
	"strings"
)

// Edited returns copies of rule (a rule struct) each with the field at path
// ("Count", "ClusterConfig.ThresholdType") changed in one way: every copy
// must be told apart from rule by any identity the field is part of.
func Edited(rule any, path string) []any {
	var out []any
	typ := reflect.TypeOf(rule)
	f, ok := typ.FieldByName(strings.Split(path, ".")[0])
	if !ok {
		panic("ruleidtest: " + typ.String() + " has no field " + path)
	}
	ft := f.Type
	for _, name := range strings.Split(path, ".")[1:] {
		sf, ok := ft.FieldByName(name)
		if !ok {
			panic("ruleidtest: " + typ.String() + " has no field " + path)
		}
		ft = sf.Type
	}
	for _, edit := range edits(ft) {
		v := reflect.New(typ).Elem()
		v.Set(reflect.ValueOf(rule))
		fv := v
		for _, name := range strings.Split(path, ".") {
			fv = fv.FieldByName(name)
		}
		edit(fv)
		out = append(out, v.Interface())
	}
	return out
}

// edits are changes to a field of type t, each of which must change the key.
func edits(t reflect.Type) []func(reflect.Value) {
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
			for _, e := range edits(t.Field(i).Type) {
				out = append(out, func(v reflect.Value) { e(v.Field(i)) })
			}
		}
		return out
	case reflect.Pointer: // unset or set, and the value it points to edited
		return []func(reflect.Value){
			func(v reflect.Value) {
				if v.IsNil() {
					v.Set(reflect.New(t.Elem()))
				} else {
					v.SetZero()
				}
			},
			func(v reflect.Value) {
				p := reflect.New(t.Elem())
				if !v.IsNil() {
					p.Elem().Set(v.Elem())
				}
				edits(t.Elem())[0](p.Elem())
				v.Set(p)
			},
		}
	case reflect.Slice: // one more, one fewer, one changed
		return []func(reflect.Value){
			func(v reflect.Value) { v.Set(reflect.Append(v, reflect.New(t.Elem()).Elem())) },
			func(v reflect.Value) { v.Set(v.Slice(0, 0)) },
			func(v reflect.Value) {
				c := reflect.MakeSlice(t, v.Len(), v.Len())
				reflect.Copy(c, v)
				if c.Len() > 0 {
					edits(t.Elem())[0](c.Index(0))
				}
				v.Set(c)
			},
		}
	}
	panic("ruleidtest: no edit for a field of type " + t.String())
}
