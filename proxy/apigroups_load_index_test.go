package proxy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/internal/match"
)

// reachingAllPairs is what a route kept of the groups before the index:
// every test of every group decided for the route.
func reachingAllPairs(groups []*apiGroup, pattern string) []groupReach {
	var out []groupReach
	for _, g := range groups {
		var open []pathTest
		all := false
		for i := range g.tests {
			switch g.tests[i].reach(pattern) {
			case reachAll:
				all = true
			case reachSome:
				open = append(open, g.tests[i])
			}
		}
		if !all && open == nil {
			continue
		}
		if all {
			open = nil
		}
		out = append(out, groupReach{g, open})
	}
	return out
}

func sameReach(a, b []groupReach) bool {
	return slices.EqualFunc(a, b, func(x, y groupReach) bool {
		return x.g == y.g && (x.open == nil) == (y.open == nil) && slices.Equal(x.open, y.open)
	})
}

// TestGroupLoadIndexAgreesWithAllPairs: the groups the index finds for a
// route, and the tests it leaves open, are those deciding every test of
// every group finds, over random static and parametric patterns and
// random exact, prefix and regex matches (keyed, whole-literal, with no
// literal start, case-folded).
func TestGroupLoadIndexAgreesWithAllPairs(t *testing.T) {
	segs := []string{"/a", "/a/", "/ab", "/b", "/", "/a/b", "/ba", "/%41", "/é"}
	params := []string{"", "", "{id}", "/{id}", "*", "/*", "{id}/x", "/{id}/a"}
	res := []string{"^/a", "^/a/", "a", "^/a/b$", "^/(a|b)/", "^/ab?", "/$", "^/[ab]", "^/a(?i)B", "^/b/[0-9]+", "(?i)^/A", "^", "(?m)^/a/", `\A/ab`}
	r := rand.New(rand.NewPCG(3, 4))
	path := func() string {
		s := ""
		for range 1 + r.IntN(3) {
			s += segs[r.IntN(len(segs))]
		}
		return s
	}
	for round := range 500 {
		var groups []*apiGroup
		for k := range 1 + r.IntN(12) {
			g := &apiGroup{name: fmt.Sprint("g", k)}
			for range 1 + r.IntN(3) {
				var m config.APIMatch
				switch r.IntN(3) {
				case 0:
					m.Exact = path()
				case 1:
					m.Prefix = path()
				default:
					m.Regex = res[r.IntN(len(res))]
				}
				pt, err := compilePathTest(m, true)
				if err != nil {
					t.Fatal(err)
				}
				g.tests = append(g.tests, pt)
			}
			groups = append(groups, g)
		}
		ix := newGroupIndex(groups)
		for range 30 {
			pattern := match.NormalizePattern(path()+params[r.IntN(len(params))], true)
			ids := ix.candidates(pattern, nil)
			if len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids) {
				t.Fatalf("round %d, %s: a test is a candidate twice: %v", round, pattern, ids)
			}
			got, want := ix.reaching(pattern, nil), reachingAllPairs(groups, pattern)
			if !sameReach(got, want) {
				t.Fatalf("round %d, route %s:\nindex     %+v\nall pairs %+v", round, pattern, got, want)
			}
		}
	}
}

// TestGroupLoadIndexSnapshot: in a loaded snapshot, each route, with
// hosts or without, static or not, spelled to be normalized, holds the
// groups and open tests that deciding every group's tests gives.
func TestGroupLoadIndexSnapshot(t *testing.T) {
	cfg, err := config.Parse("index.yaml", []byte(`
upstreams:
  up:
    targets: ["http://127.0.0.1:1"]
routes:
  - { path: /cart, hosts: [shop.example.com], upstream: up, resource: shop-cart }
  - { path: /cart, upstream: up, resource: cart }
  - { path: "/order/{id}", hosts: ["*.example.com"], upstream: up, resource: order }
  - { path: "/order/{id}/items", upstream: up, resource: items }
  - { path: "/v2/orders/{id}", upstream: up, resource: v2 }
  - { path: "/files/*", hosts: [files.example.com], upstream: up, resource: files }
  - { path: "/caf%c3%a9/{id}", upstream: up, resource: cafe }
  - { path: "/a//b", upstream: up, resource: ab }
  - { path: /nothing, upstream: up, resource: nothing }
  - { path: "/*", upstream: up, resource: rest }
apiGroups:
  - name: orders
    match: [{ prefix: /order/ }, { exact: /cart }, { regex: "^/v[0-9]+/orders" }]
  - { name: ord, match: [{ prefix: /ord }] }
  - { name: seven, match: [{ exact: /order/7 }, { exact: /order/7/items }] }
  - { name: anywhere, match: [{ regex: orders }] }
  - { name: files-api, match: [{ regex: "^/files/[a-z]+$" }] }
  - { name: cafe-api, match: [{ prefix: /café/ }] }
  - { name: v2-api, match: [{ regex: "^/v2/" }] }
  - { name: ab-api, match: [{ prefix: /a/b }] }
  - { name: cart-any-case, match: [{ regex: "(?i)^/CART" }] }
`))
	if err != nil {
		t.Fatal(err)
	}
	g := New(Deps{Log: zerolog.Nop()})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	s := g.Current()
	find := []struct{ host, path string }{
		{"shop.example.com", "/cart"}, {"other.test", "/cart"}, {"x.example.com", "/order/1"},
		{"", "/order/1/items"}, {"", "/v2/orders/1"}, {"files.example.com", "/files/x"},
		{"", "/caf%C3%A9/1"}, {"", "/a/b"}, {"", "/nothing"}, {"", "/zzz"},
	}
	reached := 0
	for i, rc := range cfg.Routes {
		rt, _ := s.router.find(chi.NewRouteContext(), find[i].host, "GET", find[i].path)
		if rt == nil || rt.resource != rc.Resource {
			t.Fatalf("%s on %s found %v, want route %s", find[i].path, find[i].host, rt, rc.Resource)
		}
		var got []groupReach
		for _, gd := range rt.guards.list[:rt.guards.n] {
			if gg, ok := gd.(*groupsGuard); ok {
				for _, e := range gg.entries {
					got = append(got, groupReach{e.g, e.tests})
				}
			}
		}
		want := reachingAllPairs(s.groups, match.NormalizePattern(rc.Path, s.target.mergeSlashes))
		if !sameReach(got, want) {
			t.Errorf("route %s (%s):\nsnapshot  %+v\nall pairs %+v", rc.Path, rc.Resource, got, want)
		}
		reached += len(want)
	}
	if reached < len(cfg.Routes) {
		t.Errorf("only %d groups reached over %d routes: the document tests little", reached, len(cfg.Routes))
	}
}

// TestGroupLoadIndexDecidesFew: with n routes /rK/x or /rK/{id} and n
// groups matching /rK/ by prefix, exact path or literal-start regex, each
// route decides the one test that reaches it, not all n: loading stays
// linear (SPEC §3), where deciding every pair made 10,000 of each take
// 4 to 6 s.
func TestGroupLoadIndexDecidesFew(t *testing.T) {
	const n = 10000
	var groups []*apiGroup
	for k := range n {
		var m config.APIMatch
		switch k % 3 {
		case 0:
			m.Prefix = fmt.Sprintf("/r%d/", k)
		case 1:
			m.Exact = fmt.Sprintf("/r%d/x", k)
		default:
			m.Regex = fmt.Sprintf("^/r%d/[0-9x]+", k)
		}
		pt, err := compilePathTest(m, true)
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, &apiGroup{name: fmt.Sprint("g", k), tests: []pathTest{pt}})
	}
	ix := newGroupIndex(groups)
	decided := 0
	for k := range n {
		pattern := fmt.Sprintf("/r%d/x", k)
		if k%2 == 1 {
			pattern = fmt.Sprintf("/r%d/{id}", k)
		}
		decided += len(ix.candidates(pattern, nil))
		if got := ix.reaching(pattern, nil); len(got) != 1 || got[0].g != groups[k] {
			t.Fatalf("route %s reached %d groups, want g%d alone", pattern, len(got), k)
		}
	}
	if decided != n {
		t.Errorf("%d routes decided %d tests, want %d (one each)", n, decided, n)
	}
}
