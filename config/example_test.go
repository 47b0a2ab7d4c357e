package config_test

import (
	"fmt"

	"sluice/config"
)

func ExampleParse() {
	rules := []byte(`
upstreams:
  orders: {targets: ["http://127.0.0.1:9001"]}
routes:
  - {path: "/order/{orderId}", upstream: orders, resource: get-order}
flowRules:
  - {resource: get-order, count: 100}
  - {resource: get-ordr, count: -1}
`)
	_, err := config.Parse("rules.yaml", rules)
	fmt.Println(err)

	cfg, _ := config.Parse("rules.yaml", rules[:len(rules)-len("  - {resource: get-ordr, count: -1}\n")])
	r := cfg.FlowRules[0]
	fmt.Println(r.Resource, r.Count, r.Grade, r.ControlBehavior, r.StatIntervalMs, cfg.AdminListen())
	// Output:
	// rules.yaml:8: flowRules[1].resource: unknown resource "get-ordr": no route has it (resources: get-order)
	// rules.yaml:8: flowRules[1].count: must be > 0, got -1
	// get-order 100 qps reject 1000 127.0.0.1:9090
}
