package cluster_test

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"sluice/cluster"
	"sluice/config"
)

// A gateway builds one Service for its cluster: section, runs it for its
// lifetime and hands it to the limiter, which calls Acquire for clusterMode
// rules and falls back to local limiting when err != nil.
func Example() {
	svc, err := cluster.New(cluster.Options{
		URL:       "redis://127.0.0.1:6379/0",
		Namespace: "shop",
		Log:       zerolog.Nop(),
		OnState:   func(up bool) { fmt.Println("redis up:", up) },
	})
	if err != nil {
		panic(err)
	}
	defer svc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go svc.Run(ctx)

	// A rule built in code takes config's defaults (qps, statIntervalMs
	// 1000, thresholdType global) from config.Defaults, as a file's from Load.
	cfg := config.Config{FlowRules: []config.FlowRule{{Resource: "get-order", Count: 100, ClusterMode: true}}}
	config.Defaults(&cfg)
	ok, err := svc.Acquire(&cfg.FlowRules[0], "", 1)
	switch {
	case err != nil:
		fmt.Println("no cluster decision; apply the rule locally:", err)
	case ok:
		fmt.Println("pass")
	default:
		fmt.Println("blocked by the cluster")
	}
}
