package config_test

import (
	"testing"

	"sluice/config"
)

// testdata/spec_example.yaml is SPEC §3's rules.yaml as the SPEC prints it:
// a user who copies the contract's example must get a file that loads, with
// the values it writes out (Sentinel's defaults among them).
func TestSpecExampleLoads(t *testing.T) {
	cfg, err := config.Load("testdata/spec_example.yaml")
	if err != nil {
		t.Fatalf("SPEC §3's example does not load:\n%v", err)
	}
	if got := cfg.FlowRules[0].MaxQueueingTimeMs; got != 500 {
		t.Errorf("flowRules[0].maxQueueingTimeMs = %d, want 500", got)
	}
	if p := cfg.ParamRules[0]; p.Window != config.WindowRolling || p.Timezone != "UTC" {
		t.Errorf("paramRules[0]: window %q, timezone %q; want rolling, UTC", p.Window, p.Timezone)
	}
}
