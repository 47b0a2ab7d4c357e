package main

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sluice/config"
)

// docs/fleet.md's table of the two halves names every top-level section
// of rules.yaml once, in the half config puts it: a section added to the
// schema, or moved, is documented where a fleet's operator looks.
func TestFleetDocNamesEverySectionInItsHalf(t *testing.T) {
	doc, err := os.ReadFile("docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| (`listen`.*?) \\| (.*?) \\|$").FindSubmatch(doc)
	if row == nil {
		t.Fatal("docs/fleet.md has no row of the two halves starting with `listen`")
	}
	names := regexp.MustCompile("`([a-zA-Z0-9]+)`")
	half := map[string]string{}
	for i, side := range []string{"gateway", "document"} {
		for _, m := range names.FindAllSubmatch(row[i+1], -1) {
			if prev, dup := half[string(m[1])]; dup {
				t.Errorf("docs/fleet.md names %s in the %s half and the %s half", m[1], prev, side)
			}
			half[string(m[1])] = side
		}
	}
	gw := config.GatewaySections()
	ct := reflect.TypeFor[config.Config]()
	for i := range ct.NumField() {
		name, _, _ := strings.Cut(ct.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		want := "document"
		if slices.Contains(gw, name) {
			want = "gateway"
		}
		if got := half[name]; got != want {
			t.Errorf("docs/fleet.md puts %s in the %q half, config in the %s half", name, got, want)
		}
		delete(half, name)
	}
	for name := range half {
		t.Errorf("docs/fleet.md names %s, which is no section of rules.yaml", name)
	}
}
