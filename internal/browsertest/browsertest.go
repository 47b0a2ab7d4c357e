// Package browsertest starts Debian's headless Chromium for the real-browser
// tests of the dashboard (admin's and e2e's), the same way in both.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
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
	t.Skip("SKIPPING the real-browser dashboard test: chromium not found (apt-get install -y chromium, or set CHROMIUM=/path)")
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
