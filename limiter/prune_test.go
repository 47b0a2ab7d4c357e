package limiter_test

import (
	"fmt"
	"testing"

	"sluice/config"
	"sluice/limiter"
)

// summary is what the pruning tests compare of Stats: each resource's
// passes and calls in flight, and its entrances' passes.
func summary(st []limiter.ResourceStats) map[string]string {
	m := make(map[string]string, len(st))
	for _, r := range st {
		s := fmt.Sprintf("pass %v conc %d", r.Node.PassQps, r.Node.Concurrency)
		for _, e := range r.Entrances {
			s += fmt.Sprintf(" %s:%v", e.Name, e.PassQps)
		}
		m[r.Resource] = s
	}
	return m
}

// A reload keeps the statistics of every resource and entrance the new
// snapshot still names (a rule's resource, a relate rule's refResource,
// a Checker's resource and entrance, a tracked API group) and forgets the
// others: renaming a route's resource 15 times must not leave 15 nodes of
// up to 10,000 origins each behind. Calls entered before the reload end
// on the nodes they hold without bringing a forgotten one back.
func TestCompileForgetsRemovedResources(t *testing.T) {
	relate := qps("b", 100)
	relate.Strategy, relate.RefResource = config.StrategyRelate, "ref"
	f1 := compile(t, qps("a", 100), relate, qps("gone", 100))
	a, oldEnt, gone, ref := f1.Checker("a", "web"), f1.Checker("a", "old"), f1.Checker("gone", "web"), f1.Checker("ref", "web")
	f1.Track("group-old")
	held, _ := a.Enter(t0, "x", 1)
	tok, _ := a.Enter(t0, "y", 1)
	tok.Exit(t0, false)
	tok, _ = oldEnt.Enter(t0, "", 1)
	tok.Exit(t0, false)
	heldGone, _ := gone.Enter(t0, "", 1)
	tok, _ = ref.Enter(t0, "", 1)
	tok.Exit(t0, false)

	f2 := limiter.Compile(defaulted(qps("a", 100), relate), f1, limiter.Options{})
	a2 := f2.Checker("a", "web")
	f2.Track("group-new")
	f2.Seal()
	// A Checker after Seal does not bring back what Seal let go.
	f2.Checker("gone", "web")

	steps := []struct {
		name string
		end  func()
		want map[string]string
	}{
		{"after the reload", func() {}, map[string]string{
			"a":         "pass 3 conc 1 web:2", // the entrance "old" no route enters by any more
			"b":         "pass 0 conc 0",
			"ref":       "pass 1 conc 0", // named by the relate rule: kept, its entrance not
			"gone":      "pass 0 conc 0 web:0",
			"group-new": "pass 0 conc 0",
		}},
		{"calls of the old snapshot ended", func() { held.Exit(t0, false); heldGone.Exit(t0, false) }, map[string]string{
			"a":         "pass 3 conc 0 web:2",
			"b":         "pass 0 conc 0",
			"ref":       "pass 1 conc 0",
			"gone":      "pass 0 conc 0 web:0",
			"group-new": "pass 0 conc 0",
		}},
		{"a call on the new snapshot", func() {
			tok, _ := a2.Enter(t0, "x", 1)
			tok.Exit(t0, false)
		}, map[string]string{
			"a":         "pass 4 conc 0 web:3",
			"b":         "pass 0 conc 0",
			"ref":       "pass 1 conc 0",
			"gone":      "pass 0 conc 0 web:0",
			"group-new": "pass 0 conc 0",
		}},
	}
	for _, s := range steps {
		s.end()
		if got := summary(f2.Stats(t0)); fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("%s: stats\n%v\nwant\n%v", s.name, got, s.want)
		}
	}
	if o := f2.Stats(t0)[0]; o.Resource != "a" || len(o.Origins) != 2 {
		t.Errorf("origins of a not carried over: %+v", o)
	}

	// The next Compile, without Seal, carries only what f2 named.
	f3 := limiter.Compile(defaulted(qps("c", 100)), f2, limiter.Options{})
	if got, want := summary(f3.Stats(t0)), map[string]string{"c": "pass 0 conc 0"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after a second reload: %v, want %v", got, want)
	}
	// A Compile whose snapshot is dropped (a failed build) leaves prev whole.
	if got := summary(f2.Stats(t0)); len(got) != 5 {
		t.Errorf("the snapshot in force lost nodes to a later Compile: %v", got)
	}
}
