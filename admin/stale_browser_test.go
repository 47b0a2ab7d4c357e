package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/admin"
	"sluice/internal/browsertest"
)

// TestDashboardSaysWhenItIsStale: when the admin API stops answering (the
// gateway was stopped), the page greys out the numbers it shows and says
// since when they are stale, rather than showing the last pass and block
// rates as live; once a restarted gateway answers, the page is live again at
// once and the chart leaves the outage a gap instead of drawing a line
// across it. A resource's long name wraps inside its card: the page never
// scrolls sideways, and no console error is logged (a favicon's 404 was).
func TestDashboardSaysWhenItIsStale(t *testing.T) {
	chromium := browsertest.Chromium(t)
	long := "long-" + strings.Repeat("x", 250)
	newServer := func() (*admin.Server, context.CancelFunc) {
		srv := admin.New(admin.Options{
			State: func() admin.State { return admin.State{Ready: true} },
			Stats: func() []admin.ResourceStats {
				return []admin.ResourceStats{
					{Resource: "orders", NodeStats: admin.NodeStats{PassQps: 6, BlockQps: 4}},
					{Resource: long, NodeStats: admin.NodeStats{PassQps: 1}},
				}
			},
		})
		ctx, stop := context.WithCancel(context.Background())
		go srv.Run(ctx)
		return srv, stop
	}
	first, stopFirst := newServer()
	t.Cleanup(stopFirst)
	var (
		serving atomic.Pointer[admin.Server]
		down    atomic.Bool
		hung    atomic.Bool
		release = make(chan struct{})
	)
	serving.Store(first)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hung.Load() {
			<-release // accepted, never answered (a stopped process)
			return
		}
		if down.Load() {
			// Gone: the connection closes with no answer.
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		serving.Load().Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) }) // before ts.Close, which waits for the hung handlers

	bctx := browsertest.Tab(t, chromium, 90*time.Second)
	// What the page writes to its console: an exception is a defect; so is
	// an error other than a read the outage failed (net::ERR_...), such as a
	// favicon's 404.
	var (
		mu       sync.Mutex
		problems []string
	)
	console := chromedp.Console(bctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError && !strings.Contains(m.Text, "net::ERR_") {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	const card = `document.querySelector('[data-resource="orders"]')`
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, bctx, 20*time.Second, "the live numbers and a chart of several samples",
		card+`?.querySelector('.stat.pass .v')?.textContent === "6.00" && +(`+card+`.querySelector('polyline.pass')?.getAttribute('data-points')) >= 3 && !document.body.classList.contains('stale')`)
	wide, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	if err != nil || wide {
		t.Errorf("a resource of a 255-byte name widens the page past the window (%v)", err)
	}

	down.Store(true)
	browsertest.Poll(t, bctx, 10*time.Second, "the page marks its numbers stale",
		`document.body.classList.contains('stale') && /unreachable since .* stale/.test(document.querySelector('#status').textContent)`)
	grey, err := chromedp.Run(bctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('#resources')).opacity`))
	if err != nil || grey == "1" {
		t.Errorf("the stale numbers are shown at opacity %q (%v), want greyed out", grey, err)
	}
	time.Sleep(3 * time.Second) // an outage longer than a sample's gap

	// A new gateway: its history starts now.
	second, stopSecond := newServer()
	t.Cleanup(stopSecond)
	serving.Store(second)
	down.Store(false)
	browsertest.Poll(t, bctx, 5*time.Second, "the page is live again within a few polls, its pill too",
		`!document.body.classList.contains('stale') && document.querySelector('#status').textContent === 'ready'`)
	browsertest.Poll(t, bctx, 10*time.Second, "the chart leaves the outage a gap",
		`+(`+card+`?.querySelector('svg.chart')?.getAttribute('data-runs')) === 2`)

	// A gateway that accepts connections and never answers is as gone.
	hung.Store(true)
	browsertest.Poll(t, bctx, 15*time.Second, "the page marks its numbers stale when the API hangs",
		`document.body.classList.contains('stale')`)
	mu.Lock()
	defer mu.Unlock()
	if len(problems) != 0 {
		t.Errorf("the page's console: %q", problems)
	}
}
