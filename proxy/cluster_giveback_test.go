package proxy_test

import (
	"crypto/rand"
	"encoding/hex"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"

	"sluice/cluster"
	"sluice/config"
	"sluice/proxy"
)

// clusterGateway loads rules (YAML after the cluster and upstream
// sections; routes go to upstream "up") on a gateway whose clusterMode
// rules count in the shared Redis at 127.0.0.1:6379, in a namespace of
// the test's own. It skips the test without Redis.
func clusterGateway(t *testing.T, rules string) *proxy.Gateway {
	t.Helper()
	const url = "redis://127.0.0.1:6379/0"
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "giveback-" + hex.EncodeToString(b[:])
	cfg, err := config.Parse("cluster.yaml", []byte(`
cluster: { redis: "`+url+`", namespace: `+ns+` }
upstreams:
  up:
    targets: ["http://upstream.invalid"]
`+rules))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := cluster.New(cluster.Options{URL: url, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	if _, err := svc.Acquire(&config.FlowRule{Resource: "probe-" + ns, LimitApp: "default", Grade: config.GradeQPS,
		Count: 1, Strategy: config.StrategyDirect, StatIntervalMs: 1000}, "", 1); err != nil {
		t.Skip("no redis at 127.0.0.1:6379: ", err)
	}
	up := &stubUpstream{}
	up.status.Store(200)
	g := proxy.New(proxy.Deps{Log: zerolog.Nop(), Clock: &fakeClock{}, Transport: up, Forwarder: "standard", Cluster: svc})
	if err := g.Load(cfg); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestClusterTokenOfBlockedCallIsGivenBack: a call that a clusterMode flow
// rule lets through and a later rule (here a local param rule) blocks
// uses no one's quota (docs/rules.md, Combining rules). Without the give
// back, one client refused by its per-key param rule burns the fleet-wide
// flow quota, and every other client is refused too: 3 calls of key "a"
// (1 passed, 2 refused by the param rule) left nothing for key "b" in a
// cluster window of 3.
func TestClusterTokenOfBlockedCallIsGivenBack(t *testing.T) {
	g := clusterGateway(t, `
routes:
  - { path: "/order/{id}", upstream: up, resource: get-order }
flowRules:
  - { resource: get-order, count: 3, statIntervalMs: 60000, clusterMode: true }
paramRules:
  - { resource: get-order, param: "header:X-Key", count: 1, durationSec: 60 }
`)
	get := func(key string) (int, string) {
		r := httptest.NewRequest("GET", "/order/1", nil)
		r.Header.Set("X-Key", key)
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		return w.Code, w.Header().Get("X-Sluice-Blocked")
	}
	if code, _ := get("a"); code != 200 {
		t.Fatalf("first call of key a: %d, want 200", code)
	}
	for i := 0; i < 2; i++ {
		if code, why := get("a"); code != 429 || why != "param" {
			t.Fatalf("call %d of key a: %d %q, want 429 param", i+2, code, why)
		}
	}
	// Only one call has passed the cluster window of 3: key b must pass.
	if code, why := get("b"); code != 200 {
		t.Fatalf("key b: %d (blocked by %q), want 200: the param-blocked calls of key a kept their cluster flow tokens in Redis", code, why)
	}
}

// TestClusterParamValueOfBlockedRequestIsGivenBack: when one value of a
// request blocks a clusterMode param rule, what the values before it took
// in Redis is given back (docs/rules.md, Several values). Without it, a
// client drains another value's fleet-wide quota with requests that are
// all refused and never forwarded: two refused ?id=a&id=b (b spent) left
// a, which never passed a call, refused on its own.
func TestClusterParamValueOfBlockedRequestIsGivenBack(t *testing.T) {
	g := clusterGateway(t, `
routes:
  - { path: "/order", upstream: up, resource: order }
paramRules:
  - { resource: order, param: "query:id", count: 2, durationSec: 60, clusterMode: true }
`)
	get := func(target string) (int, string) {
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		return w.Code, w.Header().Get("X-Sluice-Blocked")
	}
	for i := 0; i < 2; i++ {
		if code, _ := get("/order?id=b"); code != 200 {
			t.Fatalf("call %d of b: %d, want 200", i+1, code)
		}
	}
	for i := 0; i < 2; i++ {
		if code, why := get("/order?id=a&id=b"); code != 429 || why != "param" {
			t.Fatalf("a+b call %d: %d %q, want 429 param (b is spent)", i+1, code, why)
		}
	}
	// a's window holds no pass: both of its calls pass.
	for i := 0; i < 2; i++ {
		if code, why := get("/order?id=a"); code != 200 {
			t.Fatalf("a alone, call %d: %d (%q), want 200: the refused a+b calls kept a's tokens in Redis", i+1, code, why)
		}
	}
	if code, why := get("/order?id=a"); code != 429 || why != "param" {
		t.Fatalf("a's third call: %d %q, want 429 param: a's count is 2", code, why)
	}
}
