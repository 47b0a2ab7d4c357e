package admin_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice/admin"
)

// resourcesOf maps each metric family to the resource label values it has
// series of, sorted.
func resourcesOf(t *testing.T, reg *prometheus.Registry) map[string][]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "resource" && !slices.Contains(out[mf.GetName()], l.GetValue()) {
					out[mf.GetName()] = append(out[mf.GetName()], l.GetValue())
				}
			}
		}
		slices.Sort(out[mf.GetName()])
	}
	return out
}

// Each reload keeps the series of the names still configured, counts
// included, and drops the others' (docs/admin.md: the number of series is
// fixed by rules.yaml, not by every name it ever held). A call that
// entered before the reload and ends after it counts into metrics no
// longer exported, and brings no series back.
func TestRetainDropsRemovedResources(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := admin.NewMetrics(reg)
	old := m.Resource("res-1") // held by a call in flight across the reloads
	m.Resource("group-1")
	old.Pass(time.Millisecond)
	m.CircuitState("res-1", 1)

	steps := []struct {
		resources, circuits []string // in force after the reload
		want                []string
	}{
		{[]string{"res-2", "group-1"}, []string{"res-2"}, []string{"group-1", "res-2"}},
		{[]string{"res-3"}, nil, []string{"res-3"}},
		{[]string{"res-3"}, []string{"res-3"}, []string{"res-3"}},
	}
	for i, s := range steps {
		for _, r := range s.resources {
			m.Resource(r).Pass(time.Millisecond) // the snapshot's build, then a call
		}
		for _, r := range s.circuits {
			m.CircuitState(r, 0)
		}
		m.RetainResources(s.resources)
		m.RetainCircuits(s.circuits)
		old.Error(time.Second) // the old call ends
		got := resourcesOf(t, reg)
		for _, name := range []string{"sluice_requests_total", "sluice_blocked_total", "sluice_request_duration_seconds", "sluice_body_too_large_total"} {
			if fmt.Sprint(got[name]) != fmt.Sprint(s.want) {
				t.Errorf("reload %d: %s of %v, want %v", i, name, got[name], s.want)
			}
		}
		if fmt.Sprint(got["sluice_circuit_state"]) != fmt.Sprint(s.circuits) {
			t.Errorf("reload %d: sluice_circuit_state of %v, want %v", i, got["sluice_circuit_state"], s.circuits)
		}
	}
	// res-3 stayed in force over two reloads: its counts did too.
	srv := admin.New(admin.Options{Registry: reg, Stats: func() []admin.ResourceStats { return nil }})
	if text, want := scrape(t, srv), `sluice_requests_total{resource="res-3",result="pass"} 2`+"\n"; !strings.Contains(text, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}
