package admin_test

import (
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/admin"
	"sluice/config"
	"sluice/internal/browsertest"
)

// TestDashboardFitsTheWindow: with the shipped rules.yaml, whose routes
// table is wide (every method of a route listed), the page never scrolls
// sideways and the rule editor stays in the window, from a laptop's width
// to a wide screen. At 1300 px the rules table pushed the editor half out
// of the window.
func TestDashboardFitsTheWindow(t *testing.T) {
	chromium := browsertest.Chromium(t)
	data, err := os.ReadFile("../rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/rules.yaml"
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	srv := admin.New(admin.Options{
		ConfigPath: path,
		Validate:   validate,
		State:      func() admin.State { return admin.State{Ready: true, Config: cfg, Path: path} },
	})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	bctx := browsertest.Tab(t, chromium, 60*time.Second)
	for _, width := range []int64{1920, 1300, 1100, 900} {
		if err := chromedp.Do(bctx, chromedp.EmulateViewport(width, 900), chromedp.Navigate(ts.URL+"/")); err != nil {
			t.Fatal(err)
		}
		browsertest.Poll(t, bctx, 20*time.Second, "the rules in force and the editor's fields are shown",
			`document.querySelector('#rules table') && document.querySelector('#editor-fields input')`)
		type sizes struct {
			Window, Page, Editor, Rules float64
		}
		fit, err := chromedp.Run(bctx, chromedp.Evaluate[sizes](`({
			Window: window.innerWidth,
			Page: document.documentElement.scrollWidth,
			Editor: document.querySelector('#editor-panel').getBoundingClientRect().right,
			Rules: document.querySelector('#rules-panel').getBoundingClientRect().right,
		})`))
		if err != nil {
			t.Fatal(err)
		}
		if fit.Page > fit.Window || fit.Editor > fit.Window || fit.Rules > fit.Window {
			t.Errorf("%d px: page %v px wide, rules panel ends at %v, editor at %v; want all within the window's %v",
				width, fit.Page, fit.Rules, fit.Editor, fit.Window)
		} else {
			t.Logf("%d px: page %v, rules panel ends at %v, editor at %v", width, fit.Page, fit.Rules, fit.Editor)
		}
	}
}
