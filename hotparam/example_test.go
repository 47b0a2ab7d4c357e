package hotparam_test

import (
	"fmt"
	"time"

	"sluice/config"
	"sluice/hotparam"
)

// The seed example of docs/rules.md#the-seed-example: /order/{orderId} limited to 2 calls per second
// per order id, except 102 (4) and 103 (10).
func Example() {
	orderID := config.Source{Kind: config.SourcePath, Name: "orderId"}
	// Rules built in code take config's defaults (qps, reject, durationSec
	// 1) from config.Defaults, as a rules file takes them from config.Load.
	cfg := config.Config{ParamRules: []config.ParamRule{{
		Resource: "get-order", Param: config.Key{orderID}, Count: 2,
		Items: []config.ParamItem{{Value: "102", Count: 4}, {Value: "103", Count: 10}},
	}}}
	config.Defaults(&cfg)
	set := hotparam.Compile(cfg.ParamRules, nil)
	check := set.For("get-order") // once per route, when the snapshot is built

	start := int64(0) // nanoseconds on the caller's monotonic clock
	for _, id := range []string{"1", "102", "103", "7"} {
		passed := 0
		var last time.Duration
		for range 20 {
			tok, v := check.Enter(start, vals{orderID: id}, 1)
			if v.Blocked {
				last = v.RetryAfter
				continue
			}
			passed++
			tok.Exit(start, 200) // the call finished, answered 200
		}
		fmt.Printf("order %s: %d of 20 passed, retry after %v\n", id, passed, last)
	}
	// A request without the parameter is not limited by the rule.
	_, v := check.Enter(start, vals{}, 1)
	fmt.Println("no orderId, blocked:", v.Blocked)
	// Output:
	// order 1: 2 of 20 passed, retry after 500ms
	// order 102: 4 of 20 passed, retry after 250ms
	// order 103: 10 of 20 passed, retry after 100ms
	// order 7: 2 of 20 passed, retry after 500ms
	// no orderId, blocked: false
}
