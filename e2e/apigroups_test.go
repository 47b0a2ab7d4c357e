package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestAPIGroupsE2E: API groups against the real binary, by counts only
// (every window is a minute, so the machine's pace changes nothing).
//   - orders-api spans two routes (/order/{id} by prefix, /cart exactly):
//     its flow rule of count 5 lets 5 of 12 requests, alternating between
//     the routes, reach the upstream in total; the others are 429 naming the
//     group;
//   - keyed spans /k1/{id} and /k2/{id}: its param rule (2 per X-Key) lets
//     one key through twice over both routes, and another key on its own;
//   - the groups are listed in /api/resources and sluice_requests_total.
func TestAPIGroupsE2E(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, nil)
	g := startGateway(t, rulesFor(up.URL, `
routes:
  - { path: "/order/{id}", upstream: up, resource: get-order }
  - { path: /cart, upstream: up, resource: cart }
  - { path: "/k1/{id}", upstream: up, resource: k1 }
  - { path: "/k2/{id}", upstream: up, resource: k2 }
apiGroups:
  - name: orders-api
    match: [{ prefix: /order/ }, { exact: /cart }]
  - name: keyed
    match: [{ regex: "^/k[0-9]/" }]
flowRules:
  - { resource: orders-api, count: 5, statIntervalMs: 60000 }
paramRules:
  - { resource: keyed, param: "header:X-Key", count: 2, durationSec: 60 }
`))
	status := map[int]int{}
	for i := range 12 {
		path := "/cart"
		if i%2 == 0 {
			path = "/order/" + string(rune('a'+i))
		}
		resp, body := get(t, g.URL+path)
		status[resp.StatusCode]++
		if resp.StatusCode == 429 && (!strings.Contains(body, `"resource":"orders-api"`) || resp.Header.Get("X-Sluice-Blocked") != "flow") {
			t.Errorf("%s: 429 %q with X-Sluice-Blocked %q, want the group named and flow", path, body, resp.Header.Get("X-Sluice-Blocked"))
		}
	}
	if n, _ := up.stats(); status[200] != 5 || status[429] != 7 || n != 5 {
		t.Fatalf("orders-api (count 5 over /order/{id} and /cart): statuses %v, upstream got %d; want 5 x 200, 7 x 429, 5 upstream", status, n)
	}

	keyed := []struct{ path, key string }{{"/k1/x", "A"}, {"/k2/x", "A"}, {"/k1/y", "A"}, {"/k2/y", "B"}}
	var got []int
	for _, k := range keyed {
		resp, _ := get(t, g.URL+k.path, "X-Key: "+k.key)
		got = append(got, resp.StatusCode)
	}
	if want := []int{200, 200, 429, 200}; !slices.Equal(got, want) {
		t.Errorf("keyed (2 per X-Key over /k1 and /k2): statuses %v, want %v", got, want)
	}
	if n, _ := up.stats(); n != 8 {
		t.Errorf("upstream got %d requests in all, want 8", n)
	}

	var rs admResources
	code, body, _ := admDo(t, "GET", g.AdminURL+"/api/resources", "")
	if code != 200 || json.Unmarshal([]byte(body), &rs) != nil {
		t.Fatalf("GET /api/resources: %d %.200s", code, body)
	}
	for _, name := range []string{"orders-api", "keyed", "get-order", "cart"} {
		if _, ok := rs.get(name); !ok {
			t.Errorf("/api/resources does not list %s: %.300s", name, body)
		}
	}
	m := metrics(t, g)
	for series, want := range map[string]float64{
		`sluice_requests_total{resource="orders-api",result="pass"}`:  5,
		`sluice_requests_total{resource="orders-api",result="block"}`: 7,
		`sluice_blocked_total{reason="flow",resource="orders-api"}`:   7,
		`sluice_requests_total{resource="keyed",result="pass"}`:       3,
		`sluice_requests_total{resource="keyed",result="block"}`:      1,
	} {
		if m[series] != want {
			t.Errorf("%s = %v, want %v", series, m[series], want)
		}
	}
}
