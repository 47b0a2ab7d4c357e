package main

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sluice/config"
)

// yamlKeys are every key rules.yaml has, at any depth: the yaml tags of
// config.Config and of every struct it holds.
func yamlKeys() map[string]bool {
	keys := map[string]bool{}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				keys[name] = true
			}
			if name != "-" || strings.Contains(opts, "inline") {
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeFor[config.Config]())
	return keys
}

var firstCode = regexp.MustCompile("`([^`]*)`")

// TestSentinelMapNamesRealFields: every sluice field that docs/sentinel.md
// maps a Sentinel field to (the first code span of a table's second column)
// is a rules.yaml key, so the page cannot name a field that was renamed or
// never built.
func TestSentinelMapNamesRealFields(t *testing.T) {
	b, err := os.ReadFile("docs/sentinel.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := yamlKeys()
	checked := 0
	lines, numbers := proseLines(string(b))
	for i, l := range lines {
		if !strings.HasPrefix(l, "|") || strings.HasPrefix(l, "|---") {
			continue
		}
		cells := strings.Split(strings.ReplaceAll(l, `\|`, "/"), "|")
		if len(cells) < 4 || strings.TrimSpace(cells[1]) == "Sentinel" {
			continue
		}
		m := firstCode.FindStringSubmatch(cells[2])
		if m == nil {
			continue
		}
		// "routes[].resource: x / y" -> "resource"; "clusterConfig.thresholdType" -> "thresholdType"
		field, _, _ := strings.Cut(m[1], ":")
		field = strings.TrimSpace(field)
		if j := strings.LastIndexAny(field, "."); j >= 0 {
			field = field[j+1:]
		}
		checked++
		if !keys[field] {
			t.Errorf("docs/sentinel.md:%d maps to %q, which is no rules.yaml key", numbers[i], field)
		}
	}
	if checked < 40 {
		t.Errorf("checked %d fields: the tables were not read", checked)
	}
}
