package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/internal/browsertest"
)

// TestDashboardShowsUpstreamTargets: the real gateway's dashboard, in
// headless Chromium, shows each target's state as it changes: a target
// killed under traffic turns "ejected", one whose health check fails turns
// "down", the third stays "up".
func TestDashboardShowsUpstreamTargets(t *testing.T) {
	chromium := browsertest.Chromium(t)
	a, sick := startTimedUpstream(t, 0), startTimedUpstream(t, 0)
	deadURL, kill := startUpstreamd(t, "dead")
	g := startGateway(t, fmt.Sprintf(`
upstreams:
  web:
    targets: [%q, %q, %q]
    retries: 2
    # Two bad probes in a row (at least 240 ms apart) take a target down:
    # traffic has that long to find the killed one first (see below).
    healthCheck: { path: /healthz, interval: 300ms, timeout: 200ms, unhealthyThreshold: 2 }
    passive: { consecutiveFailures: 2, ejectFor: 60s, maxEjectedPercent: 50 }
routes:
  - path: /*
    upstream: web
`, a.URL, sick.URL, deadURL))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	actx, cancelAlloc := browsertest.Allocator(ctx, t, chromium)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	row := func(url string) string { return `[data-upstream="web"] tr[data-target="` + url + `"]` }
	state := func(url string) string {
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(document.querySelector('`+row(url)+`') || {dataset: {}}).dataset.state || ""`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(g.AdminURL+"/"), chromedp.WaitVisible(chromedp.CSS(row(deadURL)))); err != nil {
		t.Fatalf("the upstream panel never listed the targets: %v", err)
	}
	for _, u := range []string{a.URL, sick.URL, deadURL} {
		if s := state(u); s != "up" {
			t.Fatalf("%s shown %q before anything failed, want up", u, s)
		}
	}
	kill()
	// Traffic must find the dead target before its probes do (the second
	// bad one in a row, 240 to 600 ms away; with one, the next probe could
	// come at once, and did in 1 run of 3): a probe that takes it down first
	// keeps traffic off it, so it is never ejected and the panel rightly
	// shows it "down".
	for range 9 {
		get(t, g.URL+"/x")
	}
	sick.sick.Store(true)
	poll(t, 10*time.Second, "the panel shows the dead target ejected and the sick one down", func() string {
		get(t, g.URL+"/x") // traffic finds out about the dead target
		if s1, s2, s3 := state(a.URL), state(sick.URL), state(deadURL); s1 != "up" || s2 != "down" || s3 != "ejected" {
			return fmt.Sprintf("states %s, %s, %s", s1, s2, s3)
		}
		return ""
	})
	t.Logf("panel: %q | %q | %q", browsertest.Text(t, bctx, row(a.URL)), browsertest.Text(t, bctx, row(sick.URL)),
		browsertest.Text(t, bctx, row(deadURL)))
}
