package config_test

import (
	"strings"
	"testing"
	"time"

	"sluice/config"
)

// TestClusterRulesSharingAWindowAreRefused: two clusterMode rules alike in
// every field that names a Redis window count in one window, so each call
// took a token there twice and the fleet passed half the count both rules
// said (a dryRun copy of a rule, say). The later one is refused, naming
// the earlier; rules whose windows differ, or local rules, load.
func TestClusterRulesSharingAWindowAreRefused(t *testing.T) {
	const head = `upstreams: {app: {targets: ["http://127.0.0.1:9001"]}}
cluster: { redis: "redis://127.0.0.1:6379/0" }
routes: [{ path: /a, upstream: app, resource: a }]
`
	for _, tc := range []struct {
		name, rules string
		want        string // "" loads
	}{
		{"a dryRun copy", `flowRules:
  - { resource: a, count: 10, clusterMode: true }
  - { resource: a, count: 10, clusterMode: true, dryRun: true }
`, "r.yaml:6: flowRules[1].clusterMode: counts in the same Redis window as flowRules[0] (line 5)"},
		{"another behaviour, statIntervalMs written out", `flowRules:
  - { resource: a, count: 10, clusterMode: true, statIntervalMs: 1000 }
  - { resource: a, count: 10, clusterMode: true, controlBehavior: throttle, maxQueueingTimeMs: 100 }
`, "r.yaml:6: flowRules[1].clusterMode: counts in the same Redis window as flowRules[0] (line 5)"},
		{"another count", `flowRules:
  - { resource: a, count: 10, clusterMode: true }
  - { resource: a, count: 11, clusterMode: true }
`, ""},
		{"another limitApp", `flowRules:
  - { resource: a, count: 10, clusterMode: true }
  - { resource: a, count: 10, clusterMode: true, limitApp: x }
`, ""},
		{"one local", `flowRules:
  - { resource: a, count: 10, clusterMode: true }
  - { resource: a, count: 10 }
`, ""},
		{"param rules with other items", `paramRules:
  - { resource: a, param: ip, count: 10, clusterMode: true }
  - { resource: a, param: ip, count: 10, clusterMode: true, items: [{value: 10.0.0.1, count: 50}] }
`, "r.yaml:6: paramRules[1].clusterMode: counts in the same Redis window as paramRules[0] (line 5)"},
		{"an item's count another rule's", `paramRules:
  - { resource: a, param: ip, count: 5, clusterMode: true }
  - { resource: a, param: ip, count: 10, clusterMode: true, items: [{value: 10.0.0.1, count: 5}] }
`, "r.yaml:6: paramRules[1].clusterMode: counts in the same Redis window as paramRules[0] (line 5)"},
		{"a rule's own items", `paramRules:
  - { resource: a, param: ip, count: 10, clusterMode: true, items: [{value: 10.0.0.1, count: 5}, {value: 10.0.0.2, count: 5}, {value: 10.0.0.3, count: 10}] }
`, ""},
		{"param rules on other keys", `paramRules:
  - { resource: a, param: ip, count: 10, clusterMode: true }
  - { resource: a, param: "header:X-User", count: 10, clusterMode: true }
`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("r.yaml", []byte(head+tc.rules))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want %q", err, tc.want)
			case tc.want != "" && strings.Count(err.Error(), "same Redis window") != 1:
				t.Errorf("error %v, want the shared window reported once", err)
			}
		})
	}
}

// TestClusterNamespaceWithoutBraces: the namespace is inside every key's
// Redis Cluster hash tag ("{namespace:...}"). A "}" at its start made
// "{}..." an empty tag, so the gateway set and the lift counter, which one
// script reads together, sat in different slots: every heartbeat failed
// with CROSSSLOT and cluster limiting never came on. Braces are refused.
func TestClusterNamespaceWithoutBraces(t *testing.T) {
	for _, tc := range []struct{ ns, want string }{
		{"shop", ""},
		{"shop:eu-1", ""},
		{"}shop", `r.yaml:2: cluster.namespace: must not hold { or } (the namespace is inside the keys' Redis Cluster hash tag), got "}shop"`},
		{"sh{op}", `r.yaml:2: cluster.namespace: must not hold { or }`},
	} {
		doc := "cluster: { redis: \"redis://127.0.0.1:6379/0\",\n  namespace: \"" + tc.ns + "\" }\nupstreams: {app: {targets: [\"http://127.0.0.1:9001\"]}}\nroutes: [{ path: /a, upstream: app }]\n"
		_, err := config.Parse("r.yaml", []byte(doc))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("namespace %q refused: %v", tc.ns, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("namespace %q: error %v, want %q", tc.ns, err, tc.want)
		}
	}
}

// TestClusterTimeout: cluster.timeout is how long a cluster rule's call
// waits for Redis: 20ms unless written, more than 0 and at most 1s.
func TestClusterTimeout(t *testing.T) {
	for _, tc := range []struct {
		timeout string // "" leaves it out
		want    time.Duration
		err     string
	}{
		{"", 20 * time.Millisecond, ""},
		{"250ms", 250 * time.Millisecond, ""},
		{"1s", time.Second, ""},
		{"0s", 0, "r.yaml:2: cluster.timeout: must be > 0 and <= 1s (each call of a cluster rule waits for it), got 0s"},
		{"2s", 0, "r.yaml:2: cluster.timeout: must be > 0 and <= 1s"},
	} {
		doc := "cluster: { redis: \"redis://127.0.0.1:6379/0\""
		if tc.timeout != "" {
			doc += ",\n  timeout: " + tc.timeout
		}
		doc += " }\nupstreams: {app: {targets: [\"http://127.0.0.1:9001\"]}}\nroutes: [{ path: /a, upstream: app }]\n"
		cfg, err := config.Parse("r.yaml", []byte(doc))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("timeout %q refused: %v", tc.timeout, err)
		case tc.err == "" && cfg.Cluster.Timeout.D() != tc.want:
			t.Errorf("timeout %q: %v, want %v", tc.timeout, cfg.Cluster.Timeout.D(), tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("timeout %q: error %v, want %q", tc.timeout, err, tc.err)
		}
	}
}
