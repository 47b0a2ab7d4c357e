package admin_test

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sluice/config"
)

// TestEditorFieldsAreConfigs: the dashboard editor's FIELDS (web/app.js),
// which lets a user add a field a rule does not set yet, names every field
// of config's rule types, and no other, each with the input its type takes.
// A field added to a rule type and not to FIELDS fails here.
func TestEditorFieldsAreConfigs(t *testing.T) {
	js, err := os.ReadFile("web/app.js")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)const FIELDS = \{(.*?)\n\};`).FindSubmatch(js)
	if block == nil {
		t.Fatal("web/app.js has no `const FIELDS = {...};`")
	}
	sections := map[string]reflect.Type{
		"routes":         reflect.TypeFor[config.Route](),
		"apiGroups":      reflect.TypeFor[config.APIGroup](),
		"authorityRules": reflect.TypeFor[config.AuthorityRule](),
		"flowRules":      reflect.TypeFor[config.FlowRule](),
		"paramRules":     reflect.TypeFor[config.ParamRule](),
		"degradeRules":   reflect.TypeFor[config.DegradeRule](),
	}
	secRe := regexp.MustCompile(`(?s)(\w+): \{(.*?)\}`)
	fieldRe := regexp.MustCompile(`(\w+): "(\w+)"`)
	seen := map[string]bool{}
	for _, m := range secRe.FindAllSubmatch(block[1], -1) {
		sec := string(m[1])
		typ, ok := sections[sec]
		if !ok {
			t.Errorf("FIELDS.%s: not a rule section", sec)
			continue
		}
		seen[sec] = true
		got := map[string]string{}
		for _, f := range fieldRe.FindAllSubmatch(m[2], -1) {
			got[string(f[1])] = string(f[2])
		}
		want := map[string]string{}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			want[name] = inputOf(f.Type)
		}
		for name, in := range want {
			if g, ok := got[name]; !ok {
				t.Errorf("FIELDS.%s lacks %s (config.%s has it): add it so the editor offers it", sec, name, typ.Name())
			} else if g != in {
				t.Errorf("FIELDS.%s.%s is %q, want %q for %s", sec, name, g, in, typ.Name())
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("FIELDS.%s.%s: config.%s has no such field", sec, name, typ.Name())
			}
		}
	}
	for sec := range sections {
		if !seen[sec] {
			t.Errorf("FIELDS lacks the section %s", sec)
		}
	}
}

// inputOf is the editor input a field of type t takes: a type written as
// one JSON string (config.Source) is text.
func inputOf(t reflect.Type) string {
	if t.Implements(reflect.TypeFor[json.Marshaler]()) {
		return "string"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	}
	if slices.Contains([]reflect.Kind{reflect.Slice, reflect.Struct, reflect.Map, reflect.Pointer}, t.Kind()) {
		return "json"
	}
	return "?"
}
