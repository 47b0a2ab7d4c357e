package admin

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/performance"
	"github.com/chromedp/chromedp"

	"sluice/internal/browsertest"
)

// sixtyCards is an admin server with MAX_CARDS (60) busy resources, five
// minutes of history each and new figures every second: the page a
// dashboard left open on a busy gateway shows.
func sixtyCards(tb testing.TB) *httptest.Server {
	tb.Helper()
	const n = 60
	var tick atomic.Int64
	stats := func() []ResourceStats {
		k := tick.Add(1)
		out := make([]ResourceStats, n)
		for i := range out {
			out[i] = ResourceStats{Resource: fmt.Sprintf("r%02d", i),
				NodeStats: NodeStats{PassQps: float64(100 + (k*7+int64(i)*13)%50), BlockQps: float64((k*3 + int64(i)) % 20)}}
		}
		return out
	}
	srv := New(Options{State: func() State { return State{Ready: true} }, Stats: stats})
	t0 := time.Now()
	for i := 0; i < 299; i++ {
		srv.hist.record(t0.Add(time.Duration(i-299)*time.Second), stats())
	}
	ctx, stop := context.WithCancel(context.Background())
	go srv.Run(ctx)
	ts := httptest.NewServer(srv.Handler())
	tb.Cleanup(func() { ts.Close(); stop() })
	return ts
}

// rendererTimes are the renderer's main-thread times so far, in seconds,
// by Chrome's Performance.getMetrics names: TaskDuration (all of it),
// ScriptDuration, LayoutDuration, RecalcStyleDuration.
func rendererTimes(tb testing.TB, ctx context.Context) map[string]float64 {
	tb.Helper()
	times := map[string]float64{}
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		res, err := cdp.Call(ctx, t, performance.GetMetrics, cdp.Empty{})
		for _, m := range res.Metrics {
			times[m.Name] = m.Value
		}
		return err
	}))
	if err != nil {
		tb.Fatal(err)
	}
	return times
}

// BenchmarkDashboardSixtyCards measures what a dashboard left open costs
// its browser: the renderer's main-thread time per second of wall time
// (busy-ms/s; 1000 is a whole core; and of it, script, layout and style
// recalculation), with 60 resource cards and their charts, scrolled to the
// top of the page. Each iteration is one second.
//
//	go test -run '^$' -bench DashboardSixtyCards -benchtime 10x ./admin/
func BenchmarkDashboardSixtyCards(b *testing.B) {
	chromium := browsertest.Chromium(b)
	ts := sixtyCards(b)
	ctx := browsertest.Tab(b, chromium, 10*time.Minute)
	enable := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, performance.Enable, performance.EnableParams{})
		return err
	})
	if err := chromedp.Do(ctx, enable, chromedp.Navigate(ts.URL+"/")); err != nil {
		b.Fatal(err)
	}
	browsertest.Poll(b, ctx, 30*time.Second, "60 charts drawn",
		`document.querySelectorAll('#resources polyline.pass[data-points]').length >= 60`)
	time.Sleep(2 * time.Second) // past the first fetches of 5 minutes each
	b.ResetTimer()
	start, t0 := time.Now(), rendererTimes(b, ctx)
	for range b.N {
		time.Sleep(time.Second)
	}
	t1, wall := rendererTimes(b, ctx), time.Since(start).Seconds()
	for name, unit := range map[string]string{"TaskDuration": "busy-ms/s", "ScriptDuration": "script-ms/s",
		"LayoutDuration": "layout-ms/s", "RecalcStyleDuration": "style-ms/s"} {
		b.ReportMetric((t1[name]-t0[name])*1000/wall, unit)
	}
}

// TestDashboardRedrawsOnlyWhatIsInView: with 60 resource cards, the page
// redraws each second the charts and numbers of the cards on screen, not of
// all 60 (which kept the renderer's main thread 2.4 times as busy:
// BenchmarkDashboardSixtyCards); a card scrolled into view shows the latest
// figures at once, and a card's origin table is built when it is opened.
func TestDashboardRedrawsOnlyWhatIsInView(t *testing.T) {
	t.Parallel()
	chromium := browsertest.Chromium(t)
	ts := sixtyCards(t)
	ctx := browsertest.Tab(t, chromium, 90*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 30*time.Second, "60 charts drawn once",
		`document.querySelectorAll('#resources polyline.pass[data-points]').length >= 60`)
	lastT := func(card string) int64 {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[int64](
			`+document.querySelector('[data-resource="`+card+`"] svg.chart').getAttribute('data-last-t')`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	inView := func(card string) bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
			const r = document.querySelector('[data-resource="`+card+`"]').getBoundingClientRect();
			return r.bottom > 0 && r.top < innerHeight; })()`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if !inView("r00") || inView("r59") {
		t.Fatalf("the test wants r00 on screen and r59 off it (r00 %v, r59 %v)", inView("r00"), inView("r59"))
	}
	top, bottom := lastT("r00"), lastT("r59")
	browsertest.Poll(t, ctx, 10*time.Second, "the chart on screen redrawn with newer samples",
		`+document.querySelector('[data-resource="r00"] svg.chart').getAttribute('data-last-t') >= `+fmt.Sprint(top+2000))
	if got := lastT("r59"); got != bottom {
		t.Errorf("the chart of a card off screen was redrawn (its last sample %d, then %d)", bottom, got)
	}
	// Scrolled into view, it shows what the card on screen shows.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](
		`document.querySelector('[data-resource="r59"]').scrollIntoView()`)); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 5*time.Second, "the card scrolled into view drawn with the latest samples",
		`+document.querySelector('[data-resource="r59"] svg.chart').getAttribute('data-last-t') >= `+fmt.Sprint(top+2000))
	// The origin table of a closed card is not built each second; opened,
	// it says what it has.
	empty, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`document.querySelector('[data-resource="r59"] details > div').childElementCount === 0`))
	if err != nil || !empty {
		t.Errorf("a closed card's origin table was built (%v)", err)
	}
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](
		`document.querySelector('[data-resource="r59"] details').open = true`)); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 5*time.Second, "the opened card's origin table",
		`document.querySelector('[data-resource="r59"] details > div').textContent.includes('no origins or entrances recorded')`)
}
