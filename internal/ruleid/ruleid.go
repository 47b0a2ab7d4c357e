// Package ruleid is how every rule package (limiter, hotparam, circuit)
// recognises a rule across reloads, so that state carries over the same way
// everywhere: a rule whose definition is unchanged keeps its state (windows,
// buckets, queues, breakers, calls in flight), wherever it moved in the
// file; a changed one starts afresh.
package ruleid

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Key is a rule's definition: every field that is part of its identity,
// held as its SHA-256 (a definition's text runs to about 500 bytes, and a
// gateway of 10,000 routes keeps the keys of 20,000 rules: 9.5 MB of its
// 100 MB). Equal keys mean equal limits.
type Key string

// Of returns the key of rule, a config rule struct (config.FlowRule,
// ParamRule, DegradeRule): its fields in order but those whose path
// ("Line", "ClusterConfig.FallbackToLocalWhenFail") is in skip, lists
// element by element, a pointer by the value it points to (an unset field
// differs from one set to its default, as any edit does). Which fields are
// skipped is config's decision (config.RuleID). It allocates: call it when
// compiling, not per request.
func Of(rule any, skip ...string) Key {
	v := reflect.ValueOf(rule)
	if v.Kind() != reflect.Struct {
		panic(fmt.Sprintf("ruleid: Of(%T): not a struct", rule))
	}
	var b strings.Builder
	b.WriteString(v.Type().String())
	write(&b, v, "", skip)
	sum := sha256.Sum256([]byte(b.String()))
	return Key(sum[:])
}

func write(b *strings.Builder, v reflect.Value, path string, skip []string) {
	switch v.Kind() {
	case reflect.Struct:
		b.WriteByte('{')
		t := v.Type()
		for i := range t.NumField() {
			name := t.Field(i).Name
			if skipped(skip, path, name) {
				continue
			}
			b.WriteString(name)
			b.WriteByte(':')
			// Only a nested field's path is needed, and only if
			// something is skipped: a key allocates little.
			sub := path
			if len(skip) > 0 && nests(v.Field(i).Kind()) {
				sub = path + name + "."
			}
			write(b, v.Field(i), sub, skip)
			b.WriteByte(' ')
		}
		b.WriteByte('}')
	case reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		b.WriteByte('&')
		write(b, v.Elem(), path, skip)
	case reflect.Slice, reflect.Array:
		b.WriteByte('[')
		for i := range v.Len() {
			write(b, v.Index(i), path, skip)
			b.WriteByte(' ')
		}
		b.WriteByte(']')
	case reflect.String:
		b.WriteString(strconv.Quote(v.String()))
	case reflect.Float32, reflect.Float64:
		b.WriteString(strconv.FormatFloat(v.Float(), 'g', -1, 64))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	default:
		// Maps, funcs, channels and interfaces have no place in a rule.
		panic(fmt.Sprintf("ruleid: a rule field of kind %s", v.Kind()))
	}
}

// skipped reports whether path+name is in skip, without building it.
func skipped(skip []string, path, name string) bool {
	for _, s := range skip {
		if len(s) == len(path)+len(name) && strings.HasPrefix(s, path) && s[len(path):] == name {
			return true
		}
	}
	return false
}

// nests reports whether a value of kind k may hold fields of its own.
func nests(k reflect.Kind) bool {
	return k == reflect.Struct || k == reflect.Pointer || k == reflect.Slice || k == reflect.Array
}

// Index holds the states of one compile's rules by key, in file order, for
// the next compile to take over. The zero Index is empty and ready; it is
// filled by one compile and only read afterwards.
type Index[S any] struct{ m map[Key][]S }

// Reuse returns the state prev (nil at first) holds for the occurrence of k
// that x records next, if any. Identical rules are matched by occurrence,
// so two identical rules keep two states. prev is not changed: a compile
// that fails leaves it as it was for the next attempt.
func (x *Index[S]) Reuse(prev *Index[S], k Key) (s S, ok bool) {
	if prev == nil {
		return s, false
	}
	if old := prev.m[k]; len(x.m[k]) < len(old) {
		return old[len(x.m[k])], true
	}
	return s, false
}

// Add records s as the state of the next occurrence of k.
func (x *Index[S]) Add(k Key, s S) {
	if x.m == nil {
		x.m = make(map[Key][]S)
	}
	x.m[k] = append(x.m[k], s)
}
