package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"sluice/config"
)

// BenchmarkAPIGroups measures the check path of one request (route match,
// then every guard of the route entered and exited, as route.serve runs
// them) with 0, 10 and 100 API groups, each matching /gK/ by prefix, /eK
// exactly or "^/rK/[0-9]+" by regex:
//   - none: /item/42 on /item/{id}, a route that no group can reach: the
//     groups were decided when the snapshot was built, and the route has no
//     groups guard;
//   - open: /other/42 on a catch-all route /*, where every group's
//     predicates are still open (none matches): the index by first path
//     segment finds no test to run;
//   - match: /g1/42 on /*, counted on the group that matches.
//
// allocs/op is 0 in every case.
func BenchmarkAPIGroups(b *testing.B) {
	for _, n := range []int{0, 10, 100} {
		s := benchGroupsSnapshot(b, n)
		for _, c := range []struct{ name, path string }{{"none", "/item/42"}, {"open", "/other/42"}, {"match", "/g1/42"}} {
			if n == 0 && c.name == "match" {
				continue
			}
			b.Run(fmt.Sprintf("%s/groups=%d", c.name, n), func(b *testing.B) {
				rctx := chi.NewRouteContext()
				var c1 call
				b.ReportAllocs()
				for b.Loop() {
					rctx.Reset()
					rt, _ := s.router.find(rctx, "", "GET", c.path)
					benchCheck(b, rt, &c1, c.path)
				}
				if want := min(n, 1); c.name == "match" && len(c1.groups) != want {
					b.Fatalf("%s matched %d groups, want %d", c.path, len(c1.groups), want)
				}
			})
		}
	}
}

// benchCheck runs rt's guards for a call of path as route.serve does, and
// ends the call.
func benchCheck(b *testing.B, rt *route, c *call, path string) {
	c.groups, c.blockedBy = c.groups[:0], nil
	c.path, c.n = path, 1
	for _, g := range rt.guards.list[:rt.guards.n] {
		tok, v := g.enter(1e12, c)
		if v.Blocked {
			b.Fatalf("%s blocked: %v", path, v.Reason)
		}
		c.hold(tok)
	}
	c.exit(1e12, outcome{})
}

func benchGroupsSnapshot(b *testing.B, n int) *Snapshot {
	b.Helper()
	var groups, rules strings.Builder
	if n > 0 {
		groups.WriteString("apiGroups:\n")
	}
	for k := range n {
		fmt.Fprintf(&groups, "  - name: g%d\n    match: [{ prefix: /g%d/ }, { exact: /e%d }, { regex: \"^/r%d/[0-9]+\" }]\n", k, k, k, k)
		fmt.Fprintf(&rules, "  - { resource: g%d, count: 1000000000 }\n", k)
	}
	cfg, err := config.Parse("bench.yaml", []byte(`
upstreams:
  up:
    targets: ["http://127.0.0.1:1"]
routes:
  - { path: "/item/{id}", upstream: up, resource: item }
  - { path: "/*", upstream: up, resource: rest }
`+groups.String()+`
flowRules:
  - { resource: item, count: 1000000000 }
  - { resource: rest, count: 1000000000 }
`+rules.String()))
	if err != nil {
		b.Fatal(err)
	}
	g := New(Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		b.Fatal(err)
	}
	return g.Current()
}
