package limiter_test

import (
	"fmt"

	"sluice/config"
	"sluice/limiter"
)

// A route's checker limits a resource to 2 calls a second; the third call at
// the same instant is blocked and told when to retry: when the 20 ms bucket
// holding the first two has been over for a whole second, so that no real
// second ever passes more than 2.
func Example() {
	// Rules built in code get config's defaults (qps, reject, statIntervalMs
	// 1000) from config.Defaults, as a rules file gets them from config.Load.
	cfg := config.Config{FlowRules: []config.FlowRule{{Resource: "get-order", Count: 2}}}
	config.Defaults(&cfg)
	flow := limiter.Compile(cfg.FlowRules, nil, limiter.Options{})
	c := flow.Checker("get-order", "web") // once per route, when the snapshot is built

	now := int64(0) // the proxy passes nanoseconds since process start
	for i := 0; i < 3; i++ {
		tok, v := c.Enter(now, "", 1)
		if v.Blocked {
			fmt.Printf("call %d: blocked (%s), retry after %v\n", i, v.Reason, v.RetryAfter)
			continue
		}
		fmt.Printf("call %d: passed, %v of %v left\n", i, v.Quota.Remaining, v.Quota.Limit)
		tok.Exit(now+5_000_000, false) // the response finished 5 ms later
	}
	// Output:
	// call 0: passed, 1 of 2 left
	// call 1: passed, 0 of 2 left
	// call 2: blocked (flow), retry after 1s
}
