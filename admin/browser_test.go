package admin

import (
	"context"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/config"
	"sluice/internal/browsertest"
)

// liveStats are fake limiter numbers that move with time, like a load run
// that passes about 120/s and blocks about 30/s of orders.
func liveStats(now time.Time) []ResourceStats {
	s := float64(now.UnixMilli()) / 1000
	wave := func(base, amp, period float64) float64 { return base + amp*math.Sin(2*math.Pi*s/period) }
	return []ResourceStats{
		{
			Resource:  "orders",
			NodeStats: NodeStats{PassQps: wave(120, 15, 40), BlockQps: wave(30, 12, 25), SuccessQps: wave(118, 15, 40), ErrorQps: 2, AvgRtMs: wave(24, 4, 30), Concurrency: 9},
			Origins: []NamedStats{
				{Name: "mobile", NodeStats: NodeStats{PassQps: 20, BlockQps: wave(30, 12, 25), SuccessQps: 20, AvgRtMs: 22, Concurrency: 2}},
				{Name: "web", NodeStats: NodeStats{PassQps: wave(100, 15, 40), SuccessQps: wave(98, 15, 40), ErrorQps: 2, AvgRtMs: 25, Concurrency: 7}},
			},
			Entrances: []NamedStats{{Name: "/orders/*", NodeStats: NodeStats{PassQps: wave(120, 15, 40), BlockQps: wave(30, 12, 25), AvgRtMs: 24, Concurrency: 9}}},
		},
		{
			Resource:  "users",
			NodeStats: NodeStats{PassQps: wave(45, 10, 60), SuccessQps: wave(45, 10, 60), AvgRtMs: 8, Concurrency: 1},
		},
	}
}

// screenshotPath is where the test writes its screenshot: committed in the
// repository (rel, made absolute) only when SLUICE_UPDATE_SCREENSHOT=1, else a
// temporary file, so an ordinary run leaves the git tree clean. Refresh the
// committed image with:
//
//	SLUICE_UPDATE_SCREENSHOT=1 go test -count=1 -run TestDashboardInRealBrowser ./admin/
func screenshotPath(t *testing.T, rel string) (string, error) {
	if os.Getenv("SLUICE_UPDATE_SCREENSHOT") == "1" {
		return filepath.Abs(rel)
	}
	return filepath.Join(t.TempDir(), filepath.Base(rel)), nil
}

func TestDashboardInRealBrowser(t *testing.T) {
	chromium := browsertest.Chromium(t)
	orig, err := os.ReadFile("testdata/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shot, err := screenshotPath(t, filepath.Join("testdata", "dashboard.png"))
	if err != nil {
		t.Fatal(err)
	}
	// A relative rules path, as `sluice -rules rules.yaml` gives, also keeps
	// temporary directories out of the screenshot.
	t.Chdir(t.TempDir())
	const path = "rules.yaml"
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	type loadedRules struct {
		cfg *config.Config
		at  time.Time
	}
	var inForce atomic.Pointer[loadedRules]
	load := func() {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
			return
		}
		cfg, err := config.Parse(path, data)
		if err != nil {
			t.Errorf("reload after a save: %v", err)
			return
		}
		inForce.Store(&loadedRules{cfg, time.Now()})
	}
	load()
	var reloads atomic.Int32
	srv := New(Options{
		Token:      "letmein",
		ConfigPath: path,
		Validate:   func(p string, d []byte) error { _, err := config.Parse(p, d); return err },
		Reload:     func() { reloads.Add(1); load() },
		State: func() State {
			r := inForce.Load()
			return State{Ready: true, Config: r.cfg, Path: path, LoadedAt: r.at, LastReload: r.at}
		},
		Stats: func() []ResourceStats { return liveStats(time.Now()) },
	})
	// Five minutes of history as the sampler would have recorded them, so the
	// chart (and the screenshot) shows a full window.
	now := time.Now()
	for i := historyLen - 1; i >= 1; i-- {
		at := now.Add(-time.Duration(i) * time.Second)
		srv.hist.record(at, liveStats(at))
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go srv.Run(ctx)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	actx, cancelAlloc := browsertest.Allocator(ctx, t, chromium)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 60*time.Second)
	defer cancelTimeout()

	const card = `document.querySelector('[data-resource="orders"]')`
	// The chart's legend shows the newest sample; wait until both rates are non-zero.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(ts.URL+"/"),
		chromedp.Poll[chromedp.Void](card+` && parseFloat(`+card+`.querySelector('.chart-legend [data-series="pass"]').textContent) > 0 && parseFloat(`+card+`.querySelector('.chart-legend [data-series="block"]').textContent) > 0`,
			chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)),
	); err != nil {
		t.Fatalf("dashboard never showed non-zero pass and block for orders: %v", err)
	}
	text := func(sel string) string { return browsertest.Text(t, bctx, sel) }
	pass := text(`[data-resource="orders"] .chart-legend [data-series="pass"]`)
	block := text(`[data-resource="orders"] .chart-legend [data-series="block"]`)
	points, err := chromedp.Run(bctx, chromedp.Evaluate[int](card+`.querySelector('polyline.block').getAttribute('data-points') | 0`))
	if err != nil {
		t.Fatal(err)
	}
	firstT, err := chromedp.Run(bctx, chromedp.Evaluate[int64](card+`.querySelector('svg.chart').getAttribute('data-last-t') | 0`))
	if err != nil {
		t.Fatal(err)
	}
	tilePass := text(`[data-resource="orders"] .stat[data-k="passQps"] .v`)
	tileBlock := text(`[data-resource="orders"] .stat[data-k="blockQps"] .v`)
	t.Logf("chart for orders: pass/s %s, block/s %s, %d points; tiles pass/s %s, block/s %s", pass, block, points, tilePass, tileBlock)
	if points < historyLen-1 {
		t.Errorf("block line has %d points, want the 5-minute history (>= %d)", points, historyLen-1)
	}
	for _, v := range []string{tilePass, tileBlock} {
		if f, err := strconv.ParseFloat(v, 64); err != nil || f <= 0 {
			t.Errorf("resource tile shows %q, want a positive rate", v)
		}
	}

	// An invalid edit is refused and shown; the file stays as it was.
	count := chromedp.CSS(`#editor-fields input[name="count"]`)
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(count),
		chromedp.SetValue(chromedp.CSS(`#rule-select`), "flowRules/0"),
		chromedp.SetValue(count, "-1"),
		chromedp.SendKeys(chromedp.CSS(`#token`), "letmein"),
		chromedp.Click(chromedp.CSS(`#save`)),
		chromedp.WaitVisible(chromedp.CSS(`#result.err`)),
	); err != nil {
		t.Fatalf("invalid edit: %v", err)
	}
	result := text(`#result`)
	t.Logf("editor says: %s", result)
	if !strings.Contains(result, "422") || !strings.Contains(result, "count") {
		t.Errorf("invalid edit showed %q, want the 422 and the error line", result)
	}
	if got, _ := os.ReadFile(path); string(got) != string(orig) {
		t.Fatal("an invalid edit changed rules.yaml")
	}

	// A valid edit is saved to disk and a reload is requested.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(count, "250"),
		chromedp.Click(chromedp.CSS(`#save`)),
		chromedp.WaitVisible(chromedp.CSS(`#result.ok`)),
	); err != nil {
		t.Fatalf("valid edit: %v", err)
	}
	t.Logf("editor says: %s", text(`#result`))
	got, _ := os.ReadFile(path)
	if want := strings.Replace(string(orig), "count: 100 # raised for the sale", "count: 250 # raised for the sale", 1); string(got) != want {
		t.Fatalf("rules.yaml after the edit:\n%s", got)
	}
	if reloads.Load() != 1 {
		t.Fatalf("Reload called %d times, want 1", reloads.Load())
	}
	// The page shows the reloaded rules (it re-reads /api/rules after a save).
	if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](
		`[...document.querySelectorAll('#rules td')].some((td) => td.textContent === "250")`,
		chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("rules in force never showed count 250: %v", err)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", shot, len(png))

	// Someone edits the file behind the dashboard's back: the next save is a 409.
	if err := os.WriteFile(path, []byte(strings.Replace(string(got), "count: 20", "count: 21", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx,
		chromedp.SetValue(count, "300"),
		chromedp.Click(chromedp.CSS(`#save`)),
		chromedp.WaitVisible(chromedp.CSS(`#result.err`)),
	); err != nil {
		t.Fatalf("stale edit: %v", err)
	}
	if result := text(`#result`); !strings.Contains(result, "409") {
		t.Errorf("stale edit showed %q, want 409", result)
	}
	t.Logf("editor says: %s", text(`#result`))

	// Re-read the file, as the 409 asks; the editor shows the other writer's value.
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#refresh-file`)),
		chromedp.WaitVisible(chromedp.CSS(`#result.ok`)),
	); err != nil {
		t.Fatalf("re-read: %v", err)
	}
	opt, err := chromedp.Run(bctx, chromedp.TextContent(chromedp.CSS(`#rule-select option[value="flowRules/1"]`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(opt, "count 21") {
		t.Errorf("after re-reading, the editor lists %q, want the other writer's count 21", opt)
	}

	// The chart kept moving during all this, fetching only new samples: a
	// newer last sample and still one point per second of the window.
	if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](
		`Number(`+card+`.querySelector('svg.chart').getAttribute('data-last-t')) > `+strconv.FormatInt(firstT, 10),
		chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("chart stopped at sample %d: %v", firstT, err)
	}
	points, err = chromedp.Run(bctx, chromedp.Evaluate[int](card+`.querySelector('polyline.pass').getAttribute('data-points') | 0`))
	if err != nil {
		t.Fatal(err)
	}
	if points < historyLen-1 || points > historyLen+1 {
		t.Errorf("pass line has %d points after incremental updates, want %d±1 (one per second of 5 minutes)", points, historyLen)
	}
}
