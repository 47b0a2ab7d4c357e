package admin

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/internal/browsertest"
)

// TestDashboardFollowsRedisFailover: the header's Redis pill names the form
// and the master in use and turns red while the Redis is unreachable; it
// follows a Sentinel failover (old master, down, new master) within a few
// seconds without a page reload, and is hidden without a cluster service.
func TestDashboardFollowsRedisFailover(t *testing.T) {
	t.Parallel() // mostly waits (a failover, a browser): overlaps the other waiting tests
	chromium := browsertest.Chromium(t)
	status := func(up bool, master string) any {
		return map[string]any{"form": "sentinel", "redis": "sentinel mymaster at 10.0.0.9:26379", "up": up,
			"masters": []map[string]any{{"addr": master, "up": up}}}
	}
	var cur atomic.Value
	cur.Store(status(true, "10.0.0.1:6379"))
	srv := New(Options{State: func() State { return State{Ready: true, Cluster: cur.Load()} }})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	actx, cancelAlloc := browsertest.Allocator(context.Background(), t, chromium)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(bctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	pill := func(want, class string) {
		t.Helper()
		js := `(() => { const p = document.querySelector('#redis'); return !p.hidden && p.classList.contains('` + class + `') && p.textContent.includes('` + want + `'); })()`
		if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(5*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
			t.Fatalf("the Redis pill never showed %q (%s): it shows %q", want, class, browsertest.Text(t, bctx, "#redis"))
		}
	}
	pill("Redis sentinel · master 10.0.0.1:6379 · counting in Redis", "ok")
	cur.Store(status(false, "10.0.0.1:6379"))
	pill("master 10.0.0.1:6379 · unreachable: cluster rules local", "bad")
	cur.Store(status(true, "10.0.0.2:6379"))
	pill("master 10.0.0.2:6379 · counting in Redis", "ok")
	if got := browsertest.Text(t, bctx, "#redis"); strings.Contains(got, "10.0.0.1") {
		t.Errorf("pill %q still names the old master", got)
	}

	// Without a cluster service the pill is not shown.
	srv2 := New(Options{State: func() State { return State{Ready: true} }})
	ts2 := httptest.NewServer(srv2.Handler())
	defer ts2.Close()
	if err := chromedp.Do(bctx, chromedp.Navigate(ts2.URL+"/"),
		chromedp.Poll[chromedp.Void](`document.querySelector('#status').textContent === 'ready'`, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Fatal(err)
	}
	hidden, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelector('#redis').hidden`))
	if err != nil {
		t.Fatal(err)
	}
	if !hidden {
		t.Error("the Redis pill is shown without a cluster service")
	}
}
