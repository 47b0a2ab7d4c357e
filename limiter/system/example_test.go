package system_test

import (
	"fmt"

	"sluice/config"
	"sluice/limiter/system"
)

func Example() {
	// In main: cpu := system.NewProcessCPU(); go cpu.Run(ctx, time.Second)
	cpu := cpuAt(0.3)
	guard := system.New(config.System{MaxConcurrency: 1, MaxCpuUsage: 0.9}, nil, cpu)

	now := int64(0) // ns, from the caller's monotonic clock
	first, _ := guard.Enter(now)
	_, v := guard.Enter(now)
	fmt.Println(v.Blocked, v.Reason)

	// A reload keeps the statistics: the first call is still in flight.
	guard = system.New(config.System{MaxConcurrency: 1}, guard, nil)
	first.Exit(now+1e6, false)
	_, v = guard.Enter(now + 2e6)
	fmt.Println(v.Blocked)
	// Output:
	// true system
	// false
}
