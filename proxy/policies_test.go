package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"sluice/config"
	"sluice/limiter"
)

// TestPolicyNames: a resource with one rule with a quota names its policy
// by the resource; one with several suffixes each rule with its kind and
// place among that kind of the resource's rules.
func TestPolicyNames(t *testing.T) {
	cfg := &config.Config{
		FlowRules: []config.FlowRule{
			{Resource: "a", Grade: config.GradeQPS},
			{Resource: "b", Grade: config.GradeQPS},
			{Resource: "b", Grade: config.GradeConcurrency},
			{Resource: "b", Grade: config.GradeQPS},
			{Resource: "c", Grade: config.GradeQPS, Strategy: config.StrategyRelate},
		},
		ParamRules: []config.ParamRule{
			{Resource: "b", Grade: config.GradeQPS},
			{Resource: "c", Grade: config.GradeQPS},
			{Resource: "d", Grade: config.GradeQPS, ControlBehavior: config.BehaviorThrottle},
			{Resource: "d", Grade: config.GradeQPS},
		},
	}
	names := buildPolicyNames(cfg)
	tests := []struct {
		res  string
		kind limiter.Reason
		rule int
		want string
	}{
		{"a", limiter.ReasonFlow, 0, "a"},
		{"b", limiter.ReasonFlow, 0, "b#flow1"},
		{"b", limiter.ReasonFlow, 2, "b#flow3"},
		{"b", limiter.ReasonParam, 0, "b#param1"},
		{"c", limiter.ReasonParam, 0, "c"}, // the relate rule states no quota
		{"d", limiter.ReasonParam, 1, "d"}, // nor does a throttle queue
		{"e", limiter.ReasonFlow, 0, "e"},  // a resource without rules (an API group built in code)
	}
	for _, tc := range tests {
		q := limiter.Quota{Policy: tc.res, Kind: tc.kind, Rule: tc.rule}
		if got := names[tc.res].name(&q); got != tc.want {
			t.Errorf("%s %v rule %d: %q, want %q", tc.res, tc.kind, tc.rule, got, tc.want)
		}
	}
}

// TestQuotasSet: the fields list every quota in the order reported, pk
// only on a param rule's, and RateLimit names the nearest (on a block, the
// last reported: the blocker).
func TestQuotasSet(t *testing.T) {
	key := [32]byte{1}
	names := buildPolicyNames(&config.Config{
		FlowRules:  []config.FlowRule{{Resource: "r", Grade: config.GradeQPS}, {Resource: "r", Grade: config.GradeQPS}},
		ParamRules: []config.ParamRule{{Resource: "r", Grade: config.GradeQPS}},
	})
	fill := func() *quotas {
		qs := &quotas{names: names["r"], all: names, key: &key}
		qs.Quota(limiter.Quota{Policy: "r", Kind: limiter.ReasonFlow, Rule: 0, Limit: 100, Window: time.Minute, Remaining: 50, Reset: time.Second})
		qs.Quota(limiter.Quota{Policy: "r", Kind: limiter.ReasonParam, Rule: 0, Key: "10.0.0.1", Limit: 3, Window: time.Minute, Remaining: 1, Reset: 20 * time.Second})
		qs.Quota(limiter.Quota{Policy: "r", Kind: limiter.ReasonFlow, Rule: 1, Limit: 5, Window: 10 * time.Second, Remaining: 1, Reset: 2 * time.Second})
		return qs
	}
	var pk [pkLen]byte
	partitionKey(&pk, &key, "10.0.0.1")
	wantPolicy := `"r#flow1";q=100;w=60, "r#param1";q=3;w=60;pk=:` + string(pk[:]) + `:, "r#flow2";q=5;w=10`
	for _, tc := range []struct {
		blocked bool
		want    string
	}{
		{false, `"r#param1";r=1;t=20;pk=:` + string(pk[:]) + `:`}, // 1 left, like r#flow2, but later to free
		{true, `"r#flow2";r=1;t=2`},
	} {
		h := http.Header{}
		fill().set(h, &rateLimitHeaders{}, true, tc.blocked)
		if got := h.Get("RateLimit-Policy"); got != wantPolicy {
			t.Errorf("blocked %v: RateLimit-Policy %s, want %s", tc.blocked, got, wantPolicy)
		}
		if got := h.Get("RateLimit"); got != tc.want {
			t.Errorf("blocked %v: RateLimit %s, want %s", tc.blocked, got, tc.want)
		}
		if strings.Contains(h.Get("RateLimit-Policy"), "10.0.0.1") {
			t.Error("the value itself is in RateLimit-Policy")
		}
	}
	if other := func() [pkLen]byte { var o [pkLen]byte; partitionKey(&o, &[32]byte{2}, "10.0.0.1"); return o }(); other == pk {
		t.Error("pk does not depend on the gateway's key")
	}
}

// BenchmarkPartitionKey: the pk's SHA-256 alone, for an address. Natively
// (SHA-NI) it is a small part of flowAndParam below; under valgrind, which
// runs Go's AVX2 code instead, it is the largest (docs/forwarding.md).
func BenchmarkPartitionKey(b *testing.B) {
	key := [32]byte{1}
	var pk [pkLen]byte
	b.ReportAllocs()
	for b.Loop() {
		partitionKey(&pk, &key, "10.0.0.1")
	}
}

// BenchmarkQuotasSet: what the RateLimit fields cost per response: one
// flow quota (shared values), two flow quotas, and a param rule's quota
// with its pk (SHA-256 of the value).
func BenchmarkQuotasSet(b *testing.B) {
	key := [32]byte{1}
	names := buildPolicyNames(&config.Config{
		FlowRules:  []config.FlowRule{{Resource: "r", Grade: config.GradeQPS}, {Resource: "r", Grade: config.GradeQPS}},
		ParamRules: []config.ParamRule{{Resource: "r", Grade: config.GradeQPS}},
	})
	flow1 := limiter.Quota{Policy: "r", Kind: limiter.ReasonFlow, Rule: 0, Limit: 100, Window: time.Minute, Remaining: 50, Reset: time.Second}
	flow2 := limiter.Quota{Policy: "r", Kind: limiter.ReasonFlow, Rule: 1, Limit: 5, Window: 10 * time.Second, Remaining: 1, Reset: time.Second}
	param := limiter.Quota{Policy: "r", Kind: limiter.ReasonParam, Rule: 0, Key: "10.0.0.1", Limit: 3, Window: time.Minute, Remaining: 1, Reset: time.Second}
	for _, bc := range []struct {
		name string
		qs   []limiter.Quota
	}{
		{"oneFlow", []limiter.Quota{flow1}},
		{"twoFlows", []limiter.Quota{flow1, flow2}},
		{"flowAndParam", []limiter.Quota{flow1, param}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := &rateLimitHeaders{}
			h := http.Header{}
			b.ReportAllocs()
			for b.Loop() {
				qs := quotas{names: names["r"], all: names, key: &key}
				for _, q := range bc.qs {
					qs.Quota(q)
				}
				qs.set(h, c, false, false)
			}
		})
	}
}
