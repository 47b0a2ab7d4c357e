package config

import (
	"fmt"
	"slices"

	"sluice/internal/ruleid"
)

// Identity is what a rule field's value is part of.
type Identity struct {
	// Local: the rule's key in this gateway (RuleID). A reload that changes
	// the field makes a new rule, whose state (windows, buckets, queues,
	// breakers, calls in flight) starts afresh; a rule whose Local fields are
	// unchanged keeps its state, wherever it moved in the file.
	Local bool
	// Cluster (flow and param rules): the rule's Redis windows. clusterMode rules of any
	// gateways that agree on every Cluster field share one window.
	Cluster bool
}

// RuleIdentity is the decision, for every field of a rule type (FlowRule,
// ParamRule, DegradeRule, AuthorityRule; a nested field by its path,
// "ClusterConfig.ThresholdType"), whether it is part of the rule's
// identity. A field added to a rule type is added here, decided:
// TestRuleIdentityCoversEveryField fails until it is, and the local keys
// (RuleID) and cluster's Redis windows are checked against this table.
//
// A rule on an API group names it by Resource, so the group's name is part
// of the rule's identity and the group's match list is not: editing a
// group's match keeps the state of its rules (and its statistics node), as
// editing a route's path keeps the state of the rules on its resource.
func RuleIdentity(rule any) map[string]Identity {
	local, both, none := Identity{Local: true}, Identity{Local: true, Cluster: true}, Identity{}
	switch rule.(type) {
	case FlowRule:
		return map[string]Identity{
			"Resource":       both,
			"LimitApp":       both,
			"Grade":          both,
			"Count":          both,
			"Strategy":       both,
			"RefResource":    both,
			"StatIntervalMs": both,
			// How a gateway shapes the calls its window passes is its own.
			"ControlBehavior":             local,
			"WarmUpPeriodSec":             local,
			"ColdFactor":                  local,
			"MaxQueueingTimeMs":           local,
			"BurstCount":                  local,
			"DryRun":                      local,
			"ClusterMode":                 local,
			"ClusterConfig.ThresholdType": both,
			// Falling back to local limiting is each gateway's choice.
			"ClusterConfig.FallbackToLocalWhenFail": local,
			"Line":                                  none,
		}
	case ParamRule:
		return map[string]Identity{
			// A changed match limits other values: a new rule, whose
			// values start afresh (so does a changed item's match). Resource,
			// key, match, grade, count and duration also name a clusterMode
			// rule's Redis windows.
			"Resource": both, "Param": both, "Match": both, "Grade": both, "Count": both,
			"DurationSec": both, "BurstCount": local, "ControlBehavior": local,
			"MaxQueueingTimeMs": local, "MaxTrackedValues": local, "DryRun": local,
			"Items": local, "Line": none,
			// What a value's tokens count (calls, failures, the upstream's
			// figure) is what its window means, here and in Redis; which
			// answers are failures is each gateway's reading of them.
			"CountOn": both, "FailureStatuses": local,
			// The Redis windows of a clusterMode param rule: what is counted
			// (resource, source) and how much per how long; an item's count
			// picks the window of its values.
			"ClusterMode":                           local,
			"ClusterConfig.ThresholdType":           both,
			"ClusterConfig.FallbackToLocalWhenFail": local,
			// A calendar quota's keys: day and month quotas, and quotas
			// counted in different zones, are different counts.
			"Window": both, "Timezone": both,
		}
	case AuthorityRule:
		// An authority rule holds no state; its key says which rule a
		// reload keeps (an edit of any field is a new rule).
		return map[string]Identity{
			"Resource": local, "Strategy": local, "LimitApp": local, "IPs": local, "Line": none,
		}
	case DegradeRule:
		return map[string]Identity{
			"Resource": local, "Strategy": local, "MaxAllowedRtMs": local,
			"Threshold": local, "StatIntervalMs": local, "MinRequestAmount": local,
			"RetryTimeoutMs": local, "ErrorStatuses": local, "ProbeNum": local,
			"Line": none,
		}
	}
	panic(fmt.Sprintf("config: RuleIdentity(%T): not a rule", rule))
}

// RuleID is rule's key in this gateway (FlowRule, ParamRule, DegradeRule,
// AuthorityRule):
// its Local fields (RuleIdentity). Rules with equal keys are the same rule
// to a reload.
func RuleID(rule any) ruleid.Key {
	var skip []string
	switch rule.(type) {
	case FlowRule:
		skip = flowSkip
	case ParamRule:
		skip = paramSkip
	case DegradeRule:
		skip = degradeSkip
	case AuthorityRule:
		skip = authoritySkip
	default:
		panic(fmt.Sprintf("config: RuleID(%T): not a rule", rule))
	}
	return ruleid.Of(rule, skip...)
}

// The fields of each rule type that are not part of its RuleID, worked out
// once from RuleIdentity rather than for every rule of every load. They are
// never changed.
var (
	flowSkip      = fieldsNot(FlowRule{}, Identity.local)
	paramSkip     = fieldsNot(ParamRule{}, Identity.local)
	degradeSkip   = fieldsNot(DegradeRule{}, Identity.local)
	authoritySkip = fieldsNot(AuthorityRule{}, Identity.local)
)

func (id Identity) local() bool   { return id.Local }
func (id Identity) cluster() bool { return id.Cluster }

// fieldsNot lists, sorted, the fields of rule that are not part of an
// identity (in: Identity.local or Identity.cluster): what ruleid.Of skips.
func fieldsNot(rule any, in func(Identity) bool) []string {
	var skip []string
	for path, id := range RuleIdentity(rule) {
		if !in(id) {
			skip = append(skip, path)
		}
	}
	slices.Sort(skip)
	return skip
}
