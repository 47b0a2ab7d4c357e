package proxy_test

import (
	"fmt"
	"testing"

	"sluice/config"
	"sluice/limiter/circuit"
	"sluice/proxy"
)

// A reload that fails after the breakers were compiled leaves them as they
// were: the rules in force stay, and so do their breakers' states and what
// sluice_circuit_state was told (OnCircuit), which would otherwise report a
// closed breaker that was never put in force while the open one still
// blocks.
func TestFailedLoadLeavesTheBreakersInForce(t *testing.T) {
	const rules = itemRoute + `
degradeRules:
  - resource: item
    strategy: errorCount
    threshold: %d
    minRequestAmount: 1
    retryTimeoutMs: 60000
`
	parse := func(threshold int) *config.Config {
		cfg, err := config.Parse("cb.yaml", []byte(fmt.Sprintf(rules, threshold)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var changes []string
	g, _, up := stubGateway(t, fmt.Sprintf(rules, 1), func(d *proxy.Deps) {
		d.OnCircuit = func(res string, from, to circuit.State) {
			changes = append(changes, fmt.Sprintf("%s %v->%v", res, from, to))
		}
	})
	up.status.Store(500)
	for range 2 {
		get(g, "1", "")
	}
	if _, blocked, _ := get(g, "1", ""); blocked != "degrade" || len(changes) != 1 {
		t.Fatalf("after two 500s: blocked %q, changes %v; want the breaker open", blocked, changes)
	}

	// An edited rule (a new, closed breaker) in a snapshot whose build
	// fails later: an authority rule config never validated.
	bad := parse(5)
	bad.AuthorityRules = []config.AuthorityRule{{Resource: "item", Strategy: config.AuthorityWhite, IPs: []string{"not-an-address"}}}
	if err := g.Load(bad); err == nil {
		t.Fatal("Load of a snapshot that cannot be built succeeded")
	}
	if len(changes) != 1 {
		t.Errorf("the failed Load reported %v, want nothing past the first opening", changes[1:])
	}
	if _, blocked, _ := get(g, "1", ""); blocked != "degrade" {
		t.Errorf("after the failed Load: blocked %q, want the breaker in force still open", blocked)
	}

	// The same edit, built whole, goes in force and says so.
	if err := g.Load(parse(5)); err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || changes[1] != "item open->closed" {
		t.Errorf("the good Load reported %v, want item open->closed", changes)
	}
}
