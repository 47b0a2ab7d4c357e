package hotparam_test

import (
	"slices"
	"testing"
	"time"

	"sluice/config"
	"sluice/hotparam"
)

var (
	orderID = config.Source{Kind: config.SourcePath, Name: "orderId"}
	userHdr = config.Source{Kind: config.SourceHeader, Name: "X-User"}
)

// vals is a request's value by source.
type vals map[config.Source]string

func (v vals) Values(k config.Key) ([]string, bool) {
	if x, ok := v[k[0]]; ok {
		return []string{x}, true
	}
	return nil, true
}

// many is a request's values by source, several per source; a source
// mapped to nil cannot be checked (too many values).
type many map[config.Source][]string

func (m many) Values(k config.Key) ([]string, bool) {
	x, ok := m[k[0]]
	return x, !ok || x != nil
}

// single is a request carrying one value for every source; reading it
// allocates nothing.
type single struct{ v [1]string }

func (s *single) Values(config.Key) ([]string, bool) { return s.v[:], true }

func one(v string) hotparam.Values { return &single{[1]string{v}} }

func order(id string) hotparam.Values {
	if id == "" {
		return vals{}
	}
	return vals{orderID: id}
}

func sec(f float64) int64 { return int64(f * float64(time.Second)) }

func compile(t testing.TB, rules ...config.ParamRule) *hotparam.Set {
	t.Helper()
	for i := range rules {
		if rules[i].Resource == "" {
			rules[i].Resource = "get-order"
		}
		if rules[i].Param.IsZero() {
			rules[i].Param = config.Key{orderID}
		}
	}
	s := hotparam.Compile(defaulted(rules...), nil)
	return s
}

// defaulted gives rules built here config's defaults for the fields they
// leave zero, as config.Load gives a file's rules; hotparam takes rules as
// they are.
func defaulted(rules ...config.ParamRule) []config.ParamRule {
	cfg := config.Config{ParamRules: slices.Clone(rules)}
	config.Defaults(&cfg)
	return cfg.ParamRules
}

// seedRule is the example of docs/rules.md#the-seed-example: 2 per second per order id, 102 -> 4, 103 -> 10.
func seedRule() config.ParamRule {
	return config.ParamRule{
		Resource: "get-order", Param: config.Key{orderID}, Grade: config.GradeQPS, Count: 2,
		DurationSec: 1, ControlBehavior: config.BehaviorReject, MaxTrackedValues: 100000,
		Items: []config.ParamItem{{Value: "102", Count: 4}, {Value: "103", Count: 10}},
	}
}
