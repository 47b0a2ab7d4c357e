package admin_test

import (
	"context"
	"net/http/httptest"
	"strings"
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
	ejected := text(row("http://10.0.0.2:9001") + " td.state")
	if want := until.Format("15:04"); !strings.Contains(ejected, "ejected until") {
		t.Errorf("ejected target's state reads %q, want \"ejected until\" a time like %s", ejected, want)
	}
	if got := text(row("http://10.0.0.1:9001")); !strings.Contains(got, "60") {
		t.Errorf("healthy target's row %q lacks its 60 req/s", got)
	}
	if got := text(`[data-upstream="orders"] h3 .hint`); got != "1 of 3 available" {
		t.Errorf("upstream header says %q, want \"1 of 3 available\"", got)
	}
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
