package config_test

import (
	"reflect"
	"testing"
	"time"

	"sluice/config"
)

// TestDefaultsAsLoad: a Config built in code and given config.Defaults is the
// Config that Load makes of a file writing the same (non-zero) fields, for
// every section that has defaults. Explicit values that are not the defaults
// stay as they are.
func TestDefaultsAsLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		code config.Config
	}{
		{"minimal", `
upstreams: {app: {targets: ["http://127.0.0.1:9001"]}}
routes: [{path: /a, upstream: app}]
flowRules: [{resource: /a, count: 10}]
paramRules: [{resource: /a, param: "header:X-User", count: 5}]
degradeRules: [{resource: /a, strategy: errorCount, threshold: 3}]
system: {maxQps: 100}
`, config.Config{
			Upstreams:    map[string]config.Upstream{"app": {Targets: []config.Target{{URL: "http://127.0.0.1:9001"}}}},
			Routes:       []config.Route{{Path: "/a", Upstream: "app"}},
			FlowRules:    []config.FlowRule{{Resource: "/a", Count: 10}},
			ParamRules:   []config.ParamRule{{Resource: "/a", Param: config.Key{{Kind: config.SourceHeader, Name: "X-User"}}, Count: 5}},
			DegradeRules: []config.DegradeRule{{Resource: "/a", Strategy: config.DegradeErrorCount, Threshold: 3}},
			System:       config.System{MaxQps: 100},
		}},
		{"explicit values kept", `
listen: ":8181"
log: {level: debug}
server: {sendTimeout: 5s}
blockResponse: {status: 503, rateLimitHeaders: false}
upstreams:
  app:
    targets: [{url: "http://127.0.0.1:9001", weight: 3}]
    timeout: 1s
    balance: leastRequest
    healthCheck: {path: /health, healthyThreshold: 4}
    passive: {ejectFor: 10s}
routes: [{path: /a, upstream: app, resource: res, entrance: e, acquireCount: 2, methods: [get], hosts: [Example.com.]}]
flowRules:
  - {resource: res, count: 10, grade: concurrency}
  - {resource: res, count: 10, controlBehavior: warmUp, coldFactor: 4, warmUpPeriodSec: 3, statIntervalMs: 500}
paramRules: [{resource: res, param: "header:X-User", count: 5, durationSec: 2, maxTrackedValues: 10, controlBehavior: throttle}]
degradeRules: [{resource: res, strategy: slowRatio, maxAllowedRtMs: 100, threshold: 0.5, statIntervalMs: 2000, probeNum: 2, errorStatuses: ["503"]}]
`, config.Config{
			Listen:        ":8181",
			Log:           config.Log{Level: "debug"},
			Server:        config.Server{SendTimeout: config.Duration(5 * time.Second)},
			BlockResponse: config.BlockResponse{Status: 503, RateLimitHeaders: ptr(false)},
			Upstreams: map[string]config.Upstream{"app": {
				Targets:     []config.Target{{URL: "http://127.0.0.1:9001", Weight: 3}},
				Timeout:     config.Duration(time.Second),
				Balance:     config.BalanceLeastRequest,
				HealthCheck: &config.HealthCheck{Path: "/health", HealthyThreshold: 4},
				Passive:     &config.Passive{EjectFor: config.Duration(10 * time.Second)},
			}},
			Routes: []config.Route{{Path: "/a", Upstream: "app", Resource: "res", Entrance: "e", AcquireCount: 2,
				Methods: []string{"get"}, Hosts: []string{"Example.com."}}},
			FlowRules: []config.FlowRule{
				{Resource: "res", Count: 10, Grade: config.GradeConcurrency},
				{Resource: "res", Count: 10, ControlBehavior: config.BehaviorWarmUp, ColdFactor: 4, WarmUpPeriodSec: 3, StatIntervalMs: 500},
			},
			ParamRules: []config.ParamRule{{Resource: "res", Param: config.Key{{Kind: config.SourceHeader, Name: "X-User"}}, Count: 5,
				DurationSec: 2, MaxTrackedValues: 10, ControlBehavior: config.BehaviorThrottle}},
			DegradeRules: []config.DegradeRule{{Resource: "res", Strategy: config.DegradeSlowRatio, MaxAllowedRtMs: 100, Threshold: 0.5,
				StatIntervalMs: 2000, ProbeNum: 2, ErrorStatuses: []string{"503"}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loaded, err := config.Parse("rules.yaml", []byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got := tc.code
			config.Defaults(&got)
			loaded.Path = ""
			for i := range loaded.Routes {
				loaded.Routes[i].Line = 0
			}
			for i := range loaded.FlowRules {
				loaded.FlowRules[i].Line = 0
			}
			for i := range loaded.ParamRules {
				loaded.ParamRules[i].Line = 0
			}
			for i := range loaded.DegradeRules {
				loaded.DegradeRules[i].Line = 0
			}
			if !reflect.DeepEqual(&got, loaded) {
				t.Errorf("Defaults gave\n%+v\nLoad gave\n%+v", got, *loaded)
			}
		})
	}
}

// TestDefaultsKeepsLines: a rule's Line, set in code, is not a default.
func TestDefaultsKeepsLines(t *testing.T) {
	cfg := config.Config{FlowRules: []config.FlowRule{{Resource: "r", Count: 1, Line: 7}}}
	config.Defaults(&cfg)
	if l := cfg.FlowRules[0].Line; l != 7 {
		t.Errorf("Line = %d, want 7", l)
	}
}

// A flow rule that leaves maxQueueingTimeMs out queues up to 500 ms, as
// Sentinel's FlowRule; a param rule's default is 0, as Sentinel's
// ParamFlowRule; an explicit 0 stays 0.
func TestMaxQueueingTimeMsDefaults(t *testing.T) {
	doc := `upstreams: { up: { targets: ["http://127.0.0.1:9001"] } }
routes: [{ path: /a, upstream: up, resource: a }]
flowRules:
  - { resource: a, count: 10, controlBehavior: throttle }
  - { resource: a, count: 10, controlBehavior: throttle, maxQueueingTimeMs: 0 }
paramRules:
  - { resource: a, param: ip, count: 1, controlBehavior: throttle }
`
	cfg, err := config.Parse("rules.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{500, 0} {
		if got := cfg.FlowRules[i].MaxQueueingTimeMs; got != want {
			t.Errorf("flowRules[%d].maxQueueingTimeMs = %d, want %d", i, got, want)
		}
	}
	if got := cfg.ParamRules[0].MaxQueueingTimeMs; got != 0 {
		t.Errorf("paramRules[0].maxQueueingTimeMs = %d, want 0", got)
	}
}
