package admin

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/config"
	"sluice/internal/browsertest"
)

// TestDashboardMarksAPIGroups: the dashboard shows an API group's card like
// a route resource's, marked "API group"; a route resource's card is not.
func TestDashboardMarksAPIGroups(t *testing.T) {
	t.Parallel() // mostly waits (a failover, a browser): overlaps the other waiting tests
	chromium := browsertest.Chromium(t)
	cfg, err := config.Parse("rules.yaml", []byte(`
upstreams: { up: { targets: ["http://127.0.0.1:9001"] } }
routes: [{ path: "/orders/*", upstream: up, resource: orders }]
apiGroups: [{ name: orders-api, match: [{ prefix: /orders/ }] }]
`))
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{
		State: func() State { return State{Ready: true, Config: cfg, Path: "rules.yaml"} },
		Stats: func() []ResourceStats {
			return []ResourceStats{{Resource: "orders", NodeStats: NodeStats{PassQps: 5}}, {Resource: "orders-api", NodeStats: NodeStats{PassQps: 5}}}
		},
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx := browsertest.Tab(t, chromium, 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 20*time.Second, "the orders-api card marked as an API group",
		`(document.querySelector('[data-resource="orders-api"] [data-kind]') || {}).textContent === "API group"`)
	if got := browsertest.Text(t, ctx, `[data-resource="orders"] [data-kind]`); got != "" {
		t.Errorf("the orders card (a route's resource) is marked %q", got)
	}
}
