// Package browsertest starts Debian's headless Chromium for the real-browser
// tests of the dashboard (admin's and e2e's), the same way in both.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/internal/skipped"
)

// Chromium finds Debian's chromium (or $CHROMIUM). Under CI=true a missing
// browser fails the test; elsewhere the test is skipped, loudly.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found and CI=true: install the Debian package chromium (apt-get install -y chromium)")
	}
	skipped.Skip(t, "chromium", "SKIPPING the real-browser dashboard test: chromium not found (apt-get install -y chromium, or set CHROMIUM=/path)")
	return ""
}

// Allocator starts chromium headless with a fresh profile. The
// background-networking flags matter here: without them Chromium keeps
// dialing Google's hosts, which this closed network refuses.
func Allocator(ctx context.Context, t testing.TB, chromium string) (context.Context, context.CancelFunc) {
	return chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1200),
	)
}

// Text returns the text of the element sel matches on the page in ctx, or
// fails the test.
func Text(t testing.TB, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// Tab starts chromium (see Allocator) and returns a tab's context, which
// ends after within; the browser is closed when the test ends.
func Tab(t testing.TB, chromium string, within time.Duration) context.Context {
	actx, cancelAlloc := Allocator(context.Background(), t, chromium)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	bctx, cancelTimeout := context.WithTimeout(bctx, within)
	t.Cleanup(func() { cancelTimeout(); cancelBrowser(); cancelAlloc() })
	return bctx
}

// Poll waits up to within for the JavaScript expression js to be true on
// the page in ctx, or fails the test saying what was awaited.
func Poll(t testing.TB, ctx context.Context, within time.Duration, what, js string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js,
		chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
