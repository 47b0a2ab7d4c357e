package circuit_test

import (
	"fmt"
	"time"

	"sluice/config"
	"sluice/limiter/circuit"
)

func Example() {
	// Rules built in code take config's defaults (statIntervalMs 1000,
	// errorStatuses 5xx, probeNum 1) from config.Defaults, as a rules file
	// takes them from config.Load.
	cfg := config.Config{DegradeRules: []config.DegradeRule{{
		Resource: "get-order", Strategy: config.DegradeErrorCount, Threshold: 2,
		MinRequestAmount: 1, RetryTimeoutMs: 5000,
	}}}
	config.Defaults(&cfg)
	set := circuit.Compile(cfg.DegradeRules, nil, func(res string, from, to circuit.State) {
		fmt.Printf("%s: %s -> %s\n", res, from, to)
	})
	set.Install()                    // when the Set goes in force
	breakers := set.For("get-order") // once per route

	now := int64(0) // ns, from the caller's monotonic clock
	for i := 0; i < 3; i++ {
		tok, v := breakers.Enter(now)
		if v.Blocked {
			continue
		}
		// ... forward; the upstream answers 503 after 20 ms ...
		now += int64(20 * time.Millisecond)
		tok.Exit(now, 20*time.Millisecond, 500)
	}
	_, v := breakers.Enter(now)
	fmt.Println(v.Blocked, v.Reason, v.RetryAfter)
	// Output:
	// get-order: closed -> open
	// true degrade 5s
}
