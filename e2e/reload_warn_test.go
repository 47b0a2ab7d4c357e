package e2e

import (
	"strings"
	"testing"
	"time"
)

// A reload that needs a restart to take full effect says so (log.level and
// log.format are read at start), and breaker
// states are exported from the first load, not only after a change.
func TestReloadWarnsWhatNeedsARestart(t *testing.T) {
	up := startUpstream(t, nil)
	rules := func(listen, level string, cluster bool) string {
		s := "listen: \"" + listen + "\"\nlog: {level: " + level + "}\n" + rulesFor(up.URL, `
routes:
  - path: /q
    upstream: up
    resource: q
degradeRules:
  - resource: q
    strategy: errorCount
    threshold: 5
`)
		if cluster {
			s += `flowRules:
  - resource: q
    count: 100
    clusterMode: true
cluster:
  redis: redis://127.0.0.1:6379/0
`
		}
		return s
	}
	g := startGateway(t, rules(":18080", "info", false))
	_, metrics := get(t, g.AdminURL+"/metrics")
	if !strings.Contains(metrics, `sluice_circuit_state{resource="q"} 0`) {
		t.Errorf("no closed breaker state exported after the first load")
	}
	g.writeRules(rules(":18081", "debug", true))
	deadline := time.Now().Add(2 * time.Second)
	for len(g.logs.events("rules loaded")) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no reload:\n%s", g.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, want := range []string{"log.level changed", "clusterMode rule checked locally"} {
		if len(g.logs.events(want)) == 0 {
			t.Errorf("no %q warning after the reload:\n%s", want, g.logs)
		}
	}
	// The harness passes -listen, which wins over the file: the file's
	// new listen would not take effect at restart either, so no warning.
	if len(g.logs.events("listen changed")) != 0 {
		t.Errorf("a listen warning although -listen overrides the file:\n%s", g.logs)
	}
	if resp, _ := get(t, g.URL+"/q"); resp.StatusCode != 200 {
		t.Errorf("after the reload: %d, want 200 (the cluster rule applies locally)", resp.StatusCode)
	}
}
