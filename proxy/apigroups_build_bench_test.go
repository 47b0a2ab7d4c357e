package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"sluice/config"
)

// BenchmarkAPIGroupsBuild measures building a snapshot of n routes /rK/x
// and n groups, group K matching /rK/ by prefix or by the regex
// "^/rK/[0-9x]+", with a flow rule on each group: the audit's document.
// Loading is to be linear (SPEC §3): 10 times the routes and groups
// should take about 10 times as long, not 100.
func BenchmarkAPIGroupsBuild(b *testing.B) {
	for _, kind := range []string{"prefix", "regex"} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/n=%d", kind, n), func(b *testing.B) {
				cfg := buildGroupsConfig(b, kind, n)
				b.ReportAllocs()
				for b.Loop() {
					g := New(Deps{Log: zerolog.Nop()})
					if err := g.Load(cfg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func buildGroupsConfig(b *testing.B, kind string, n int) *config.Config {
	b.Helper()
	var doc strings.Builder
	doc.WriteString("upstreams:\n  up:\n    targets: [\"http://127.0.0.1:1\"]\nroutes:\n")
	for k := range n {
		fmt.Fprintf(&doc, "  - { path: /r%d/x, upstream: up, resource: res%d }\n", k, k)
	}
	doc.WriteString("apiGroups:\n")
	for k := range n {
		if kind == "prefix" {
			fmt.Fprintf(&doc, "  - { name: g%d, match: [{ prefix: /r%d/ }] }\n", k, k)
		} else {
			fmt.Fprintf(&doc, "  - { name: g%d, match: [{ regex: \"^/r%d/[0-9x]+\" }] }\n", k, k)
		}
	}
	doc.WriteString("flowRules:\n")
	for k := range n {
		fmt.Fprintf(&doc, "  - { resource: g%d, count: 100 }\n", k)
	}
	cfg, err := config.Parse("build.yaml", []byte(doc.String()))
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}
