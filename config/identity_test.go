package config_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"sluice/config"
	"sluice/internal/ruleid/ruleidtest"
)

// identityRules are one rule of each type, every field set (a list holds
// one element, so that one fewer is an edit too).
func identityRules() []any {
	yes := true
	return []any{
		config.FlowRule{Resource: "r", LimitApp: "a", Grade: config.GradeQPS, Count: 1, Strategy: config.StrategyDirect,
			RefResource: "ref", ControlBehavior: config.BehaviorReject, WarmUpPeriodSec: 1, ColdFactor: 3,
			MaxQueueingTimeMs: 5, BurstCount: 2, StatIntervalMs: 1000, DryRun: true, ClusterMode: true,
			ClusterConfig: config.ClusterConfig{ThresholdType: config.ThresholdGlobal, FallbackToLocalWhenFail: &yes}, Line: 3},
		config.ParamRule{Resource: "r", Param: config.Key{{Kind: config.SourceIP}}, Count: 1, DurationSec: 1,
			Match:   config.ParamMatch{Strategy: config.MatchCIDR, Pattern: "10.0.0.0/8"},
			CountOn: config.CountOnFailure, FailureStatuses: []string{"401"},
			Items: []config.ParamItem{{Value: "a", Match: config.MatchPrefix, Count: 2}}, Line: 3},
		config.DegradeRule{Resource: "r", RetryTimeoutMs: 1, ErrorStatuses: []string{"5xx"}, Line: 3},
		config.AuthorityRule{Resource: "r", Strategy: config.AuthorityWhite, LimitApp: "a", IPs: []string{"10.0.0.0/8"}, Line: 3},
	}
}

// fieldPaths is every field of struct type t by its path, a nested struct's
// fields too ("ClusterConfig", "ClusterConfig.ThresholdType").
func fieldPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		out = append(out, prefix+f.Name)
		if f.Type.Kind() == reflect.Struct {
			out = append(out, fieldPaths(f.Type, prefix+f.Name+".")...)
		}
	}
	return out
}

// TestRuleIdentityCoversEveryField: every field of every rule type is
// decided in config.RuleIdentity, as a whole or (a nested struct) field by
// field, and the table names no field that does not exist. A field added
// to a rule without a decision fails here.
func TestRuleIdentityCoversEveryField(t *testing.T) {
	for _, r := range identityRules() {
		table := config.RuleIdentity(r)
		paths := fieldPaths(reflect.TypeOf(r), "")
		for p := range table {
			if !slices.Contains(paths, p) {
				t.Errorf("%T: RuleIdentity decides %q, which is no field", r, p)
			}
		}
		for _, p := range paths {
			if _, ok := table[p]; ok {
				continue
			}
			// A nested struct's fields may be decided one by one instead.
			decided := false
			for q := range table {
				if strings.HasPrefix(q, p+".") {
					decided = true
				}
			}
			parent, _, nested := strings.Cut(p, ".")
			if _, whole := table[parent]; nested && whole {
				decided = true
			}
			if !decided {
				t.Errorf("%T.%s: not in RuleIdentity: decide whether it is part of the rule's identity (locally, in the cluster)", r, p)
			}
		}
	}
}

// TestRuleIDFollowsRuleIdentity: a rule's local key changes with every edit
// of a field that RuleIdentity says is Local, and with no edit of any other.
func TestRuleIDFollowsRuleIdentity(t *testing.T) {
	for _, r := range identityRules() {
		base := config.RuleID(r)
		for path, id := range config.RuleIdentity(r) {
			for _, e := range ruleidtest.Edited(r, path) {
				if changed := config.RuleID(e) != base; changed != id.Local {
					t.Errorf("%T.%s: an edit changed the key: %v; RuleIdentity says Local: %v", r, path, changed, id.Local)
				}
			}
		}
	}
}
