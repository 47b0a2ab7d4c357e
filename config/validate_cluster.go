package config

import (
	"slices"

	"sluice/internal/ruleid"
)

// The fields of each rule type that do not name its Redis windows
// (RuleIdentity's Cluster), worked out once. They are never changed.
var (
	flowNotCluster  = fieldsNot(FlowRule{}, Identity.cluster)
	paramNotCluster = fieldsNot(ParamRule{}, Identity.cluster)
)

// sharedWindows refuses a clusterMode rule that would count in a Redis
// window another clusterMode rule of the file already counts in. Rules
// alike in every field that names a window (RuleIdentity's Cluster: for a
// flow rule its resource, limitApp, grade, count, strategy, refResource,
// statIntervalMs and thresholdType) meet on one window, by design across
// gateways; two in one file would take two tokens from it for each call,
// so the fleet would pass half the count they both say. A param rule's
// item counts name windows too: an item whose count is another rule's
// count shares that rule's window for the item's values.
func (c *checker) sharedWindows() {
	type first struct {
		path string
		line int
	}
	seen := map[ruleid.Key]first{}
	// claim reports p if k is an earlier rule's window; a rule is
	// reported once.
	claim := func(p string, line int, k ruleid.Key) bool {
		if f, ok := seen[k]; ok {
			c.add(p+".clusterMode", "counts in the same Redis window as %s (line %d): the two are alike in every field that names a window, so each call would take a token there twice; make them one rule, or change the count", f.path, f.line)
			return false
		}
		seen[k] = first{p, line}
		return true
	}
	for i, r := range c.cfg.FlowRules {
		if r.ClusterMode {
			claim(idx("flowRules", i), r.Line, ruleid.Of(r, flowNotCluster...))
		}
	}
	for i, r := range c.cfg.ParamRules {
		if !r.ClusterMode {
			continue
		}
		counts := []float64{r.Count}
		for _, it := range r.Items {
			if !slices.Contains(counts, it.Count) {
				counts = append(counts, it.Count)
			}
		}
		for _, n := range counts {
			r.Count = n
			if !claim(idx("paramRules", i), r.Line, ruleid.Of(r, paramNotCluster...)) {
				break
			}
		}
	}
}
