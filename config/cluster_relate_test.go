package config_test

import (
	"strings"
	"testing"

	"sluice/config"
)

// TestClusterRelateIsRefused: a relate rule is decided on this gateway's
// own statistics of refResource, so with clusterMode: true it once loaded
// and counted nothing across the fleet; validate refuses it, naming the
// field.
func TestClusterRelateIsRefused(t *testing.T) {
	const doc = `upstreams: {app: {targets: ["http://127.0.0.1:9001"]}}
cluster: { redis: "redis://127.0.0.1:6379/0" }
routes:
  - { path: /read, upstream: app, resource: read }
  - { path: /write, upstream: app, resource: write }
flowRules:
  - { resource: read, count: 10, strategy: relate, refResource: write, clusterMode: true }
`
	_, err := config.Parse("r.yaml", []byte(doc))
	if err == nil {
		t.Fatal("a relate rule with clusterMode: true loads, but it is checked only against this gateway's local statistics: nothing is counted in the cluster")
	}
	if want := "r.yaml:7: flowRules[0].clusterMode"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %q", err, want)
	}
}
