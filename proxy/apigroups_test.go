package proxy_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/proxy"
)

// groupsHead is four routes, three of which (through a prefix, an exact
// path and a regex) are in the group orders-api.
const groupsHead = `
upstreams:
  up:
    targets: ["http://upstream.invalid"]
routes:
  - { path: "/order/{id}", upstream: up, resource: get-order }
  - { path: /cart, upstream: up, resource: cart }
  - { path: "/v2/orders/{id}", upstream: up, resource: v2 }
  - { path: /other, upstream: up, resource: other }
apiGroups:
  - name: orders-api
    match:
      - { prefix: /order/ }
      - { exact: /cart }
      - { regex: "^/v[0-9]+/orders" }
`

// resourceObserver counts, per resource, what each resource's observer
// was told.
type resourceObserver struct {
	mu     sync.Mutex
	counts map[string]int // "resource pass|block:REASON|error|dryrun"
}

func (o *resourceObserver) For(res string) proxy.Observer { return groupObs{o, res} }

func (o *resourceObserver) add(k string) {
	o.mu.Lock()
	o.counts[k]++
	o.mu.Unlock()
}

func (o *resourceObserver) get(k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[k]
}

type groupObs struct {
	o   *resourceObserver
	res string
}

func (g groupObs) Pass(time.Duration)              { g.o.add(g.res + " pass") }
func (g groupObs) Block(r string, _ time.Duration) { g.o.add(g.res + " block:" + r) }
func (g groupObs) DryRun()                         { g.o.add(g.res + " dryrun") }
func (g groupObs) Error(time.Duration)             { g.o.add(g.res + " error") }
func (g groupObs) TooLarge()                       { g.o.add(g.res + " tooLarge") }

// groupsGateway serves groupsHead and rules on the synthetic clock.
func groupsGateway(t *testing.T, rules string) (*proxy.Gateway, *fakeClock, *stubUpstream, *resourceObserver) {
	t.Helper()
	cfg, err := config.Parse("groups.yaml", []byte(groupsHead+rules))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{}
	clock.advance(1000 * time.Second)
	up := &stubUpstream{}
	up.status.Store(200)
	obs := &resourceObserver{counts: map[string]int{}}
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: clock, Transport: up, Forwarder: "standard", Observer: obs.For})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	return g, clock, up, obs
}

// groupStep: advance the clock by after, GET path, expect want ("" = 200,
// else the X-Sluice-Blocked reason) and, when given, the resource the
// block body names.
type groupStep struct {
	after    time.Duration
	path     string
	want     string
	resource string
}

func TestAPIGroupRules(t *testing.T) {
	tests := []struct {
		name  string
		rules string
		steps []groupStep
		calls int32 // requests that reached the upstream
	}{
		{"a flow rule on the group counts its routes together", `
flowRules:
  - { resource: orders-api, count: 3 }
`, []groupStep{
			{path: "/order/1"}, {path: "/cart"}, {path: "/v2/orders/9"},
			{path: "/order/2", want: "flow", resource: "orders-api"},
			{path: "/cart", want: "flow", resource: "orders-api"},
			{path: "/v3/orders/1", want: "", resource: ""}, // no route: 404 below
			{path: "/other"}, {path: "/other"}, // not in the group
			{after: 2 * time.Second, path: "/cart"},
		}, 6},
		{"a param rule on the group: each value its own bucket, paths without it pass", `
paramRules:
  - { resource: orders-api, param: "path:id", count: 1 }
`, []groupStep{
			{path: "/order/1"}, {path: "/order/1", want: "param", resource: "orders-api"},
			{path: "/v2/orders/1", want: "param"}, // the same value through another route
			{path: "/order/2"}, {path: "/cart"}, {path: "/cart"},
		}, 4},
		{"a group's block gives the route's flow pass back", `
flowRules:
  - { resource: get-order, count: 3 }
paramRules:
  - { resource: orders-api, param: "path:id", count: 1 }
`, []groupStep{
			{path: "/order/1"}, {path: "/order/1", want: "param"},
			{path: "/order/2"}, {path: "/order/3"},
			{path: "/order/4", want: "flow", resource: "get-order"},
		}, 3},
		{"the route's rules come first; the group's then must pass too", `
flowRules:
  - { resource: get-order, count: 1 }
  - { resource: orders-api, count: 2 }
`, []groupStep{
			{path: "/order/1"}, {path: "/order/2", want: "flow", resource: "get-order"},
			{path: "/cart"}, {path: "/cart", want: "flow", resource: "orders-api"},
		}, 2},
		{"a dryRun rule on the group lets everything through", `
flowRules:
  - { resource: orders-api, count: 1, dryRun: true }
`, []groupStep{
			{path: "/order/1"}, {path: "/order/2"}, {path: "/cart"},
		}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, clock, up, _ := groupsGateway(t, tc.rules)
			for i, st := range tc.steps {
				clock.advance(st.after)
				w := httptest.NewRecorder()
				g.ServeHTTP(w, httptest.NewRequest("GET", st.path, nil))
				want := 200
				switch {
				case st.want != "":
					want = 429
				case strings.HasPrefix(st.path, "/v3/"):
					want = 404
				}
				if w.Code != want || w.Header().Get("X-Sluice-Blocked") != st.want {
					t.Fatalf("step %d (%s): status %d blocked %q, want %d %q", i, st.path, w.Code, w.Header().Get("X-Sluice-Blocked"), want, st.want)
				}
				if st.resource != "" && !strings.Contains(w.Body.String(), `"resource":"`+st.resource+`"`) {
					t.Errorf("step %d (%s): body %s, want it to name %s", i, st.path, w.Body, st.resource)
				}
			}
			if got := up.calls.Load(); got != tc.calls {
				t.Errorf("upstream got %d requests, want %d", got, tc.calls)
			}
		})
	}
}

// TestAPIGroupDegrade: a breaker on the group opens on errors through one
// of its routes and refuses the others, not a route outside the group
// (errorCount 1 trips on the second error).
func TestAPIGroupDegrade(t *testing.T) {
	g, _, up, _ := groupsGateway(t, `
degradeRules:
  - { resource: orders-api, strategy: errorCount, threshold: 1, minRequestAmount: 1, retryTimeoutMs: 10000 }
`)
	up.status.Store(500)
	steps := []struct {
		path string
		want int
	}{{"/order/1", 500}, {"/v2/orders/1", 500}, {"/cart", 429}, {"/order/2", 429}, {"/other", 500}}
	for _, st := range steps {
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("GET", st.path, nil))
		if w.Code != st.want {
			t.Errorf("%s: %d, want %d", st.path, w.Code, st.want)
		}
	}
}

// TestAPIGroupCounted: the group's statistics and observer see every
// request of its routes, passed or blocked, whoever blocked it; a request
// outside the group is not counted there.
func TestAPIGroupCounted(t *testing.T) {
	g, clock, _, obs := groupsGateway(t, `
flowRules:
  - { resource: cart, count: 1 }
  - { resource: orders-api, count: 3 }
`)
	for _, p := range []string{"/order/1", "/cart", "/cart", "/v2/orders/1", "/order/2", "/other"} {
		g.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", p, nil))
	}
	// Passed: /order/1, /cart, /v2/orders/1. Blocked: /cart (by cart's rule), /order/2 (by the group's).
	for k, want := range map[string]int{
		"orders-api pass": 3, "orders-api block:flow": 2, "cart pass": 1, "cart block:flow": 1,
		"get-order block:flow": 1, "other pass": 1,
	} {
		if got := obs.get(k); got != want {
			t.Errorf("observer %q = %d, want %d", k, got, want)
		}
	}
	var found bool
	for _, rs := range g.Current().Flow.Stats(clock.Now()) {
		if rs.Resource == "orders-api" {
			found = true
			if rs.Node.PassQps != 3 || rs.Node.BlockQps != 2 {
				t.Errorf("orders-api stats: pass %v block %v, want 3 and 2", rs.Node.PassQps, rs.Node.BlockQps)
			}
		}
	}
	if !found {
		t.Error("Flow.Stats does not list orders-api")
	}
}

// TestAPIGroupReloadKeepsState: a reload that edits the group's match keeps
// the window of its rule (the rule's identity is its resource, the group's
// name), and the new match applies at once.
func TestAPIGroupReloadKeepsState(t *testing.T) {
	g, _, _, _ := groupsGateway(t, `
flowRules:
  - { resource: orders-api, count: 2 }
`)
	serve := func(p string) int {
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
		return w.Code
	}
	if a, b := serve("/order/1"), serve("/order/2"); a != 200 || b != 200 {
		t.Fatalf("first two: %d %d", a, b)
	}
	doc := strings.Replace(groupsHead, "      - { exact: /cart }\n", "      - { exact: /cart }\n      - { exact: /other }\n", 1) + `
flowRules:
  - { resource: orders-api, count: 2 }
`
	cfg, err := config.Parse("groups.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	if got := serve("/other"); got != 429 {
		t.Errorf("/other after the reload added it to the group: %d, want 429 (the group's window is full)", got)
	}
}

// TestAPIGroupsAllocateNothing: with 100 groups, a request no group
// matches and one that two groups match (by prefix and by regex, each with
// a flow rule) cost the fast path no allocation beyond a gateway without
// groups.
func TestAPIGroupsAllocateNothing(t *testing.T) {
	if proxy.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	up := startRawUpstream(t, 100)
	base := fmt.Sprintf(`
blockResponse:
  rateLimitHeaders: false
upstreams:
  up:
    targets: [%q]
routes:
  - { path: "/item/{id}", upstream: up, resource: item, forwarder: fast }
  - { path: "/*", upstream: up, resource: rest, forwarder: fast }
flowRules:
  - { resource: item, count: 1000000000 }
`, up)
	var b strings.Builder
	b.WriteString("apiGroups:\n")
	for k := range 100 {
		fmt.Fprintf(&b, "  - { name: g%d, match: [{ prefix: /g%d/ }, { regex: \"^/r[0-9]+/%d$\" }] }\n", k, k, k)
	}
	b.WriteString("  - { name: all-items, match: [{ prefix: /item/ }] }\n")
	b.WriteString("  - { name: r7, match: [{ regex: \"^/r[0-9]+/7$\" }] }\n")
	b.WriteString("flowRules:\n  - { resource: item, count: 1000000000 }\n")
	b.WriteString("  - { resource: all-items, count: 1000000000 }\n  - { resource: r7, count: 1000000000 }\n")
	allocs := func(rules, path string) float64 {
		n, _ := allocsWith(t, rules, benchRequest(path))
		return n
	}
	grouped := strings.Replace(base, "flowRules:\n  - { resource: item, count: 1000000000 }\n", b.String(), 1)
	for _, path := range []string{"/item/42", "/other/42", "/r12/7", "/g5/x"} {
		if bare, n := allocs(base, path), allocs(grouped, path); n > bare {
			t.Errorf("%s with 102 groups: %.1f allocations per request, without groups %.1f", path, n, bare)
		}
	}
}

// clusterTokens is a TokenService that grants count calls per rule
// resource, across whatever gateways share it, and records what it was
// asked.
type clusterTokens struct {
	mu    sync.Mutex
	left  map[string]int64
	asked []string
}

func (c *clusterTokens) AcquireFlow(rule *config.FlowRule, key string, n int64, _ bool) (bool, time.Duration, int64, time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, rule.Resource)
	if _, ok := c.left[rule.Resource]; !ok {
		c.left[rule.Resource] = int64(rule.Count)
	}
	if c.left[rule.Resource] < n {
		return false, 0, -1, 0, nil
	}
	c.left[rule.Resource] -= n
	return true, 0, -1, 0, nil
}

// AcquireParamLeft: this test has no clusterMode param rule.
func (c *clusterTokens) AcquireParamLeft(*config.ParamRule, float64, string, int64, bool) (bool, time.Duration, int64, time.Duration, error) {
	return true, 0, -1, 0, nil
}

func (c *clusterTokens) PeekParamLeft(*config.ParamRule, float64, string, int64, bool) (bool, time.Duration, int64, time.Duration, error) {
	return true, 0, -1, 0, nil
}

func (c *clusterTokens) ChargeParam(*config.ParamRule, float64, string, int64) error { return nil }

// AcquireQuota: this test has no calendar quota.
func (c *clusterTokens) AcquireQuota(*config.ParamRule, float64, string, int64) (bool, int64, time.Duration, time.Duration, error) {
	return true, 0, 0, 0, nil
}

func (c *clusterTokens) CheckQuota(*config.ParamRule, float64, string, int64) (bool, int64, time.Duration, time.Duration, error) {
	return true, 0, 0, 0, nil
}

func (c *clusterTokens) ChargeQuota(*config.ParamRule, float64, string, int64) error { return nil }

func (c *clusterTokens) Gateways() int { return 1 }

// TestAPIGroupClusterRule: a clusterMode flow rule on a group asks the
// token service for the group, for requests of every route the group
// matches, and its refusal blocks them; a route outside the group never
// asks.
func TestAPIGroupClusterRule(t *testing.T) {
	cfg, err := config.Parse("groups.yaml", []byte(groupsHead+`
cluster: { redis: "redis://127.0.0.1:6379/0" }
flowRules:
  - { resource: orders-api, count: 2, clusterMode: true }
`))
	if err != nil {
		t.Fatal(err)
	}
	tokens := &clusterTokens{left: map[string]int64{}}
	up := &stubUpstream{}
	up.status.Store(200)
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: &fakeClock{}, Transport: up, Forwarder: "standard", Cluster: tokens})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, p := range []string{"/order/1", "/other", "/cart", "/v2/orders/1", "/other"} {
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
		got = append(got, w.Code)
	}
	if want := []int{200, 200, 200, 429, 200}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	if want := []string{"orders-api", "orders-api", "orders-api"}; fmt.Sprint(tokens.asked) != fmt.Sprint(want) {
		t.Errorf("the token service was asked for %v, want %v", tokens.asked, want)
	}
}
