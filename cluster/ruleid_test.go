package cluster

import (
	"testing"

	"sluice/config"
	"sluice/internal/ruleid/ruleidtest"
)

// TestRedisWindowFollowsRuleIdentity: a flow rule's Redis window (its
// identity, hash and key prefix) changes with every edit of a field that
// config.RuleIdentity marks Cluster, and with no edit of any other; so two
// gateways share a window exactly when their rules agree on those fields.
func TestRedisWindowFollowsRuleIdentity(t *testing.T) {
	yes := true
	base := config.FlowRule{Resource: "r", LimitApp: "a", Grade: config.GradeQPS, Count: 1,
		Strategy: config.StrategyDirect, RefResource: "ref", ControlBehavior: config.BehaviorReject,
		WarmUpPeriodSec: 1, ColdFactor: 3, MaxQueueingTimeMs: 5, StatIntervalMs: 1000, DryRun: true,
		ClusterMode: true, Line: 3,
		ClusterConfig: config.ClusterConfig{ThresholdType: config.ThresholdGlobal, FallbackToLocalWhenFail: &yes}}
	id := identOf(&base)
	prefix := newSpec("ns", id).prefix
	for path, decided := range config.RuleIdentity(base) {
		for _, e := range ruleidtest.Edited(base, path) {
			r := e.(config.FlowRule)
			eid := identOf(&r)
			if changed := eid != id; changed != decided.Cluster {
				t.Errorf("FlowRule.%s: an edit changed the cluster identity: %v; RuleIdentity says Cluster: %v", path, changed, decided.Cluster)
			}
			if changed := newSpec("ns", eid).prefix != prefix; changed != decided.Cluster {
				t.Errorf("FlowRule.%s: an edit changed the Redis key prefix: %v; RuleIdentity says Cluster: %v", path, changed, decided.Cluster)
			}
		}
	}
}

// TestRedisParamWindowFollowsRuleIdentity: the same for a param rule's
// windows (its values' keys share the prefix), at the rule's count.
func TestRedisParamWindowFollowsRuleIdentity(t *testing.T) {
	yes := true
	base := config.ParamRule{Resource: "r", Param: config.Key{{Kind: config.SourceHeader, Name: "X-Key"}},
		Grade: config.GradeQPS, Count: 5, DurationSec: 1, ControlBehavior: config.BehaviorReject,
		MaxTrackedValues: 10, DryRun: true, ClusterMode: true, Line: 3,
		Items:         []config.ParamItem{{Value: "a", Count: 1}},
		ClusterConfig: config.ClusterConfig{ThresholdType: config.ThresholdGlobal, FallbackToLocalWhenFail: &yes}}
	id := paramIdentOf(&base, base.Count)
	prefix := newParamSpec("ns", id).prefix
	for path, decided := range config.RuleIdentity(base) {
		for _, e := range ruleidtest.Edited(base, path) {
			r := e.(config.ParamRule)
			eid := paramIdentOf(&r, r.Count)
			if changed := eid != id; changed != decided.Cluster {
				t.Errorf("ParamRule.%s: an edit changed the cluster identity: %v; RuleIdentity says Cluster: %v", path, changed, decided.Cluster)
			}
			if changed := newParamSpec("ns", eid).prefix != prefix; changed != decided.Cluster {
				t.Errorf("ParamRule.%s: an edit changed the Redis key prefix: %v; RuleIdentity says Cluster: %v", path, changed, decided.Cluster)
			}
		}
	}
}
