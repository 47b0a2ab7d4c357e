package circuit_test

import (
	"fmt"
	"time"

	"sluice/config"
	"sluice/limiter/circuit"
)

func Example() {
	rules := []config.DegradeRule{{
		Resource: "get-order", Strategy: config.DegradeErrorCount, Threshold: 2,
		StatIntervalMs: 1000, MinRequestAmount: 1, RetryTimeoutMs: 5000,
	}}
	set, err := circuit.Compile(rules, nil, func(res string, from, to circuit.State) {
		fmt.Printf("%s: %s -> %s\n", res, from, to)
	})
	if err != nil {
		panic(err)
	}
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
