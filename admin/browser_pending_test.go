package admin

import (
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/config"
	"sluice/internal/browsertest"
)

// TestDashboardShowsPendingRestart: after a reload that changed a
// start-only setting (listen, http2.h2c...), GET /api/rules lists it in
// pendingRestart, but the dashboard said only "last reload ok": an
// operator looking at it could not tell that the file's new listen was not
// in force. The rules banner now lists each such setting with the value in
// force and the file's, and says nothing once none waits.
func TestDashboardShowsPendingRestart(t *testing.T) {
	chromium := browsertest.Chromium(t)
	cfg, err := config.Parse("rules.yaml", []byte("listen: 127.0.0.1:8080\nupstreams: {app: {targets: [\"http://127.0.0.1:9\"]}}\nroutes: [{path: /a, upstream: app}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	var pending atomic.Pointer[[]PendingSetting]
	pending.Store(&[]PendingSetting{
		{Setting: "listen", Old: "127.0.0.1:8080", New: "127.0.0.1:9090"},
		{Setting: "tls.clientCAFile", Old: "", New: "/etc/ca.pem"},
	})
	at := time.Now()
	srv := New(Options{
		State: func() State {
			return State{Ready: true, Config: cfg, Path: "rules.yaml", LoadedAt: at, LastReload: at, PendingRestart: *pending.Load()}
		},
		Stats: func() []ResourceStats { return nil },
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx := browsertest.Tab(t, chromium, 40*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 15*time.Second, "the rules banner lists the pending settings", `document.querySelector('#pending-restart li[data-setting="listen"]') !== null`)
	for sel, want := range map[string][]string{
		`#pending-restart`:                                     {"Waiting for a restart", "2 settings"},
		`#pending-restart li[data-setting="listen"]`:           {"listen", "127.0.0.1:8080", "→", "127.0.0.1:9090"},
		`#pending-restart li[data-setting="tls.clientCAFile"]`: {`""`, "/etc/ca.pem"},
	} {
		got := browsertest.Text(t, ctx, sel)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s reads %q, want it to say %q", sel, got, w)
			}
		}
	}
	// A restart (or a file back to the values in force): nothing waits.
	pending.Store(&[]PendingSetting{})
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 15*time.Second, "the rules banner drawn again", `document.querySelector('#reload').textContent.includes('Rules loaded')`)
	if got := browsertest.Text(t, ctx, "#reload"); strings.Contains(got, "restart") {
		t.Errorf("nothing pending, yet the banner reads %q", got)
	}
}
