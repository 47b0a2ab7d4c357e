package admin_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/admin"
	"sluice/internal/browsertest"
)

// TestUpstreamPanelInRealBrowser: the dashboard's upstream panel shows each
// target's state (up, ejected until a time, down by health checks) and its
// traffic, follows changes, and says when an upstream is in panic mode.
func TestUpstreamPanelInRealBrowser(t *testing.T) {
	t.Parallel() // mostly waits (a failover, a browser): overlaps the other waiting tests
	chromium := browsertest.Chromium(t)
	until := time.Now().Add(30 * time.Second)
	var panicking atomic.Bool
	srv := admin.New(admin.Options{Upstreams: func() []admin.UpstreamStats {
		u := exampleUpstreams(until)
		if panicking.Load() {
			u[0].Panic = true
			u[0].Targets[0].Healthy, u[0].Targets[0].Available = false, false
		}
		return u
	}})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	actx, cancelAlloc := browsertest.Allocator(context.Background(), t, chromium)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 60*time.Second)
	defer cancelTimeout()

	row := func(url string) string { return `[data-upstream="orders"] tr[data-target="` + url + `"]` }
	if err := chromedp.Do(bctx,
		chromedp.Navigate(ts.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(row("http://10.0.0.3:9001"))),
	); err != nil {
		t.Fatalf("the upstream panel never showed the targets: %v", err)
	}
	text := func(sel string) string { return browsertest.Text(t, bctx, sel) }
	state := func(url string) string {
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('`+row(url)+`').dataset.state`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for url, want := range map[string]string{"http://10.0.0.1:9001": "up", "http://10.0.0.2:9001": "ejected", "http://10.0.0.3:9001": "down"} {
		if got := state(url); got != want {
			t.Errorf("%s shown %s, want %s", url, got, want)
		}
	}
	// Polled, not read once: a parallel test's browser shares the cores.
	poll := func(what, js string) { t.Helper(); browsertest.Poll(t, bctx, 10*time.Second, what, js) }
	poll(`the ejected target's state reads "ejected until" a time like `+until.Format("15:04"),
		`document.querySelector('`+row("http://10.0.0.2:9001")+` td.state').textContent.includes("ejected until")`)
	poll("the healthy target's row shows its 60 req/s", `document.querySelector('`+row("http://10.0.0.1:9001")+`').textContent.includes("60")`)
	poll(`the upstream header says "1 of 3 available"`, `document.querySelector('[data-upstream="orders"] h3 .hint').textContent === "1 of 3 available"`)
	ejected := text(row("http://10.0.0.2:9001") + " td.state")
	t.Logf("panel rows: %q | %q | %q", text(row("http://10.0.0.1:9001")), ejected, text(row("http://10.0.0.3:9001")))

	// Every target out: the panel follows within a refresh and names panic mode.
	panicking.Store(true)
	if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](
		`document.querySelector('[data-upstream="orders"] [data-panic]') && document.querySelector('`+row("http://10.0.0.1:9001")+`').dataset.state === "down"`,
		chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("the panel never showed panic mode: %v", err)
	}
	t.Logf("panic badge: %q", text(`[data-upstream="orders"] [data-panic]`))
}
