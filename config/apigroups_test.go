package config_test

import (
	"reflect"
	"strings"
	"testing"

	"sluice/config"
)

// TestAPIGroupsLoad: a group is decoded with its line, and rules of every
// kind may name it as they name a route's resource: a chain rule any
// route's entrance, a param rule any route's path parameter, a relate rule
// a group as its related resource.
func TestAPIGroupsLoad(t *testing.T) {
	const doc = `upstreams: {app: {targets: ["http://127.0.0.1:9001"]}}
routes:
  - { path: "/order/{id}", upstream: app, resource: get-order, entrance: web }
  - { path: /cart, upstream: app }
apiGroups:
  - name: orders-api
    match:
      - { prefix: /order/ }
      - { exact: /cart }
      - { regex: "^/v[0-9]+/orders" }
flowRules:
  - { resource: orders-api, count: 10 }
  - { resource: orders-api, count: 5, strategy: chain, refResource: web }
  - { resource: get-order, count: 5, strategy: relate, refResource: orders-api }
paramRules:
  - { resource: orders-api, param: "path:id", count: 1 }
degradeRules:
  - { resource: orders-api, strategy: errorCount, threshold: 3 }
`
	cfg, err := config.Parse("r.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []config.APIGroup{{Name: "orders-api", Line: 6, Match: []config.APIMatch{
		{Prefix: "/order/"}, {Exact: "/cart"}, {Regex: "^/v[0-9]+/orders"}}}}
	if !reflect.DeepEqual(cfg.APIGroups, want) {
		t.Errorf("apiGroups = %+v, want %+v", cfg.APIGroups, want)
	}
}

// TestAPIGroupsRefused: what a rule may not do with a group, each with its
// message (the fixture api_groups.yaml in TestLoadErrors has the group's own
// mistakes).
func TestAPIGroupsRefused(t *testing.T) {
	const head = `upstreams: {app: {targets: ["http://127.0.0.1:9001"]}}
routes:
  - { path: "/order/{id}", upstream: app, resource: get-order, entrance: web }
apiGroups:
  - { name: g, match: [{ prefix: /order/ }] }
`
	tests := []struct{ rules, want string }{
		{"flowRules: [{ resource: g, count: 1, strategy: chain, refResource: app }]",
			`r.yaml:6: flowRules[0].refResource: no route of resource "g" has entrance "app" (entrances: web)`},
		{"paramRules: [{ resource: g, param: \"path:orderId\", count: 1 }]",
			`r.yaml:6: paramRules[0].param: no route of resource "g" has a path parameter {orderId}`},
		{"flowRules: [{ resource: g2, count: 1 }]",
			`r.yaml:6: flowRules[0].resource: unknown resource "g2": no route or API group has it (resources: g, get-order)`},
	}
	for _, tt := range tests {
		_, err := config.Parse("r.yaml", []byte(head+tt.rules+"\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s:\n got %v\nwant %s", tt.rules, err, tt.want)
		}
	}
}
