package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/internal/browsertest"
)

// browserScreenshotPath is where the screenshot goes: docs/admin.md's
// docs/dashboard.png only when SLUICE_UPDATE_SCREENSHOT=1, else a temporary
// file, so ordinary runs leave the git tree clean. Refresh the docs image:
//
//	SLUICE_UPDATE_SCREENSHOT=1 flock /tmp/sluice-e2e.lock go test -count=1 -run TestDashboardDrivesTheGateway ./e2e/
func browserScreenshotPath(t *testing.T) string {
	t.Helper()
	if os.Getenv("SLUICE_UPDATE_SCREENSHOT") != "1" {
		return filepath.Join(t.TempDir(), "dashboard.png")
	}
	p, err := filepath.Abs(filepath.Join("..", "docs", "dashboard.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// browserStatuses sends n GETs to url and counts 200s and 429s.
func browserStatuses(t *testing.T, url string, n int) (pass, blocked int) {
	t.Helper()
	for range n {
		resp, _ := get(t, url)
		switch resp.StatusCode {
		case 200:
			pass++
		case 429:
			blocked++
		default:
			t.Fatalf("GET %s: %d", url, resp.StatusCode)
		}
	}
	return pass, blocked
}

// TestDashboardDrivesTheGateway opens the real gateway's dashboard in headless
// Chromium while load runs, sees the orders chart show non-zero pass and block
// rates and the params panel list the origin over its param rule, raises checkout's count from 5 to 50 (per minute) in the rule editor,
// and checks that rules.yaml on disk holds the new count and that the proxy
// now passes 50 where it passed 5.
func TestDashboardDrivesTheGateway(t *testing.T) {
	chromium := browsertest.Chromium(t)
	shot := browserScreenshotPath(t)
	// For the docs' picture the load runs a minute before the screenshot,
	// so the chart has a history to show; an ordinary run stops it at the
	// screenshot, after the page's checks, and 10 s at most.
	loadFor, shootAt := 10*time.Second, time.Duration(0)
	if os.Getenv("SLUICE_UPDATE_SCREENSHOT") == "1" {
		loadFor, shootAt = 75*time.Second, 60*time.Second
	}
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/orders/") {
			time.Sleep(15 * time.Millisecond) // a little work, for a realistic RT
		}
		fmt.Fprintf(w, "served %s", r.URL.Path)
	})
	rules := fmt.Sprintf(`# sluice rules for the dashboard test.
origin:
  from: header:X-Origin

upstreams:
  shop:
    targets: [%q]
    timeout: 2s

routes:
  - path: /checkout
    upstream: shop
    resource: checkout
  - path: /orders/*
    upstream: shop
    resource: orders
  - path: /catalog/*
    upstream: shop
    resource: catalog

flowRules:
  # checkout: 5 a minute until someone raises it in the dashboard
  - resource: checkout
    count: 5
    statIntervalMs: 60000
  - resource: orders # 20 a second
    count: 20
  - resource: catalog
    count: 100

paramRules:
  - resource: orders # 8 a second per origin
    param: header:X-Origin
    count: 8
`, up.URL)
	// A relative rules path, as an operator starts sluice, keeps the temp
	// directory out of the screenshot.
	t.Chdir(t.TempDir())
	if err := os.WriteFile("rules.yaml", []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGatewayFile(t, "rules.yaml")

	// The old limit: 5 of 8 pass.
	if pass, blocked := browserStatuses(t, g.URL+"/checkout", 8); pass != 5 || blocked != 3 {
		t.Fatalf("checkout with count 5: %d passed, %d blocked; want 5 and 3", pass, blocked)
	}

	// Load in the background: 45/s at orders (limit 20; 8 a second per origin) from two origins
	// (web 30/s, mobile 15/s), 15/s at catalog.
	loadDone, stopLoad := make(chan struct{}), make(chan struct{})
	var stopLoadOnce sync.Once
	endLoad := func() { stopLoadOnce.Do(func() { close(stopLoad) }); <-loadDone }
	var loadRes *result
	loadStart := time.Now()
	go func() {
		defer close(loadDone)
		loadRes = run(t, load{Rate: 60, Duration: loadFor, Stop: stopLoad, Targets: []target{
			to(g.URL+"/orders/1", "X-Origin: web"), to(g.URL+"/orders/2", "X-Origin: mobile"),
			to(g.URL+"/orders/3", "X-Origin: web"), to(g.URL+"/catalog/shoes", "X-Origin: web"),
		}})
	}()
	defer endLoad()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	actx, cancelAlloc := browsertest.Allocator(ctx, t, chromium)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 60*time.Second+shootAt)
	defer cancelTimeout()

	const card = `document.querySelector('[data-resource="orders"]')`
	legend := func(series string) string {
		return card + `.querySelector('.chart-legend [data-series="` + series + `"]')`
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(g.AdminURL+"/"),
		chromedp.Poll[chromedp.Void](card+` && parseFloat(`+legend("pass")+`.textContent) > 0 && parseFloat(`+legend("block")+`.textContent) > 0`,
			chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)),
	); err != nil {
		t.Fatalf("the dashboard never showed non-zero pass and block rates for orders under load: %v", err)
	}
	text := func(sel string) string { return browsertest.Text(t, bctx, sel) }
	pass := text(`[data-resource="orders"] .chart-legend [data-series="pass"]`)
	block := text(`[data-resource="orders"] .chart-legend [data-series="block"]`)
	t.Logf("orders chart: pass/s %s, block/s %s (offered 45/s, limit 20/s)", pass, block)
	if p, err := strconv.ParseFloat(pass, 64); err != nil || p > 30 {
		t.Errorf("orders chart shows pass/s %q, want about the limit of 20", pass)
	}

	// Who is limited now: the param rule's panel lists the origin sending
	// 30/s against 8 a second with its blocks. The flow rule is checked
	// first: web reaches the param rule with its share of orders' 20
	// passes a second, about 13; against 12 a second that left 2 to 7
	// blocks a minute, and on a busy machine none for the whole poll.
	const web = `document.querySelector('[data-param-resource="orders"] tr[data-value-b64="d2Vi"]')`
	if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](web+` && parseInt(`+web+`.querySelector('.blocks').textContent) > 0`,
		chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("the params panel never listed origin web with blocks: %v (panel says %q)", err, text(`#params`))
	}
	t.Logf("params panel, origin web: %s blocks/min", text(`[data-param-resource="orders"] tr[data-value-b64="d2Vi"] .blocks`))

	// Raise checkout's count to 50 in the editor: flowRules[0].
	count := chromedp.CSS(`#editor-fields input[name="count"]`)
	if err := chromedp.Do(bctx,
		chromedp.WaitReady(chromedp.CSS(`#rule-select option[value="flowRules/0"]`)),
		chromedp.SetValue(chromedp.CSS(`#rule-select`), "flowRules/0"),
	); err != nil {
		t.Fatalf("rule list: %v", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelector('#rule-select').dispatchEvent(new Event('change'))`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(count),
		chromedp.SetValue(count, "50"),
		chromedp.Click(chromedp.CSS(`#save`)),
		chromedp.WaitVisible(chromedp.CSS(`#result.ok`)),
	); err != nil {
		t.Fatalf("editing checkout's count: %v (page says %q)", err, text(`#result`))
	}
	t.Logf("editor says: %s", text(`#result`))
	got, err := os.ReadFile("rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(rules, "    count: 5\n", "    count: 50\n", 1); string(got) != want {
		t.Fatalf("rules.yaml after the edit:\n%s\nwant only checkout's count changed:\n%s", got, want)
	}
	admWaitCount(t, g, 50)

	// The new limit, through the proxy: the changed rule judges the
	// minute's 5 passes by its new count, so 45 of 60 pass.
	if pass, blocked := browserStatuses(t, g.URL+"/checkout", 60); pass != 45 || blocked != 15 {
		t.Errorf("checkout after raising count to 50 with 5 passes in the minute: %d passed, %d blocked; want 45 and 15", pass, blocked)
	} else {
		t.Logf("checkout after the edit: %d of 60 passed (before: 5 of 8)", pass)
	}

	// The page shows the reloaded rule, then the screenshot for docs/admin.md.
	if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](
		`[...document.querySelectorAll('#rules td')].some((td) => td.textContent === "50")`,
		chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("rules in force never showed count 50: %v", err)
	}
	time.Sleep(time.Until(loadStart.Add(shootAt)))
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", shot, len(png))

	endLoad()
	if loadRes != nil {
		t.Logf("background load: statuses %v, max send lag %v", loadRes.statuses(), loadRes.maxLag)
	}
}
