package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/config"
	"sluice/hotparam"
	"sluice/internal/browsertest"
)

// reviewParamsConfig is a route per resource with a rolling param rule
// (login) and a calendar quota (quota).
func reviewParamsConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse("rules.yaml", []byte(`
cluster: { redis: "redis://127.0.0.1:1/0" }
upstreams: { up: { targets: ["http://127.0.0.1:9001"] } }
routes:
  - { path: "/login", upstream: up, resource: login }
  - { path: "/api/*", upstream: up, resource: quota }
paramRules:
  - { resource: login, param: "header:X-User", count: 2, durationSec: 600 }
  - { resource: quota, param: "header:X-Key", count: 1000, window: day, timezone: Europe/Berlin, clusterMode: true }
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDashboardParamsPanel: the "who is limited now" panel shows a
// hostile value as text, a calendar quota as a quota per day with the time
// to its reset (not "1000 per 1s"), and Lift sends the value's exact bytes
// with the token typed in.
func TestDashboardParamsPanel(t *testing.T) {
	t.Parallel()
	chromium := browsertest.Chromium(t)
	cfg := reviewParamsConfig(t)
	const xss = `<img src=x onerror="window.__xss=1">`
	var mu sync.Mutex
	var lifted []string
	srv := New(Options{
		Token: "s3cret",
		State: func() State { return State{Ready: true, Config: cfg, Path: "rules.yaml"} },
		Params: func(res string, _ []string, _ int) ([]hotparam.RuleState, bool) {
			switch res {
			case "login":
				return []hotparam.RuleState{{Rule: &cfg.ParamRules[0], Ord: 0, Tracked: 2, Values: []hotparam.ValueState{
					{Value: xss, Tracked: true, Applies: true, Blocks: 12, Passes: 2, Remaining: 0, NextToken: 297 * time.Second, Count: 2},
					{Value: "\xff\xfeab", Tracked: true, Applies: true, Blocks: 3, Count: 2},
				}}}, true
			case "quota":
				return []hotparam.RuleState{{Rule: &cfg.ParamRules[1], Ord: 0, Tracked: 1, Values: []hotparam.ValueState{
					{Value: "key-1", Tracked: true, Applies: true, Blocks: 40, Passes: 1000, Remaining: 0, NextToken: 5 * time.Hour, Count: 1000, Shared: true},
				}}}, true
			}
			return nil, false
		},
		LiftParam: func(_ context.Context, res, value string) (Lifted, bool, error) {
			mu.Lock()
			lifted = append(lifted, res+"|"+value)
			mu.Unlock()
			return Lifted{Rules: 1}, true, nil
		},
		PartitionKey: func(v string) string { return "PK" + strconv.Itoa(len(v)) },
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx := browsertest.Tab(t, chromium, 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 20*time.Second, "the login param card",
		`document.querySelectorAll('[data-param-resource="login"] td.value').length === 2`)
	if got := browsertest.Text(t, ctx, `[data-param-resource="login"] tr:nth-child(2) td.value`); got != xss {
		t.Errorf("hostile value shown as %q, want it as text %q", got, xss)
	}
	xssRan, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!window.__xss || !!document.querySelector('#params img')`))
	if err != nil {
		t.Fatal(err)
	}
	if xssRan {
		t.Error("a param value became HTML")
	}
	// The calendar quota says so, and its "next token" is the reset.
	browsertest.Poll(t, ctx, 20*time.Second, "the quota param card", `!!document.querySelector('[data-param-resource="quota"] h3')`)
	title := browsertest.Text(t, ctx, `[data-param-resource="quota"] h3`)
	if !strings.Contains(title, "1000 per day") {
		t.Errorf("calendar quota card titled %q, want it to say 1000 per day", title)
	}
	if got := browsertest.Text(t, ctx, `[data-param-resource="quota"] tr:nth-child(2) td:nth-child(5)`); !strings.Contains(got, "5 h") {
		t.Errorf("calendar quota's reset shown as %q, want 5 h", got)
	}
	// The quota reads a credential (header:X-Key): until the token is typed
	// in, its value is its pk and cannot be lifted.
	if got := browsertest.Text(t, ctx, `[data-param-resource="quota"] tr:nth-child(2) td.value`); got != "pk PK5" {
		t.Errorf("a credential's value shown as %q without the token, want its pk only", got)
	}
	liftable, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.querySelector('[data-param-resource="quota"] tr:nth-child(2) button.lift').disabled`))
	if err != nil {
		t.Fatal(err)
	}
	if liftable {
		t.Error("a masked value's Lift button is enabled")
	}
	// Lift the hostile value with the token. The editor is off here (no
	// rules file), yet the token field must be there to type it in.
	visible, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const t = document.querySelector('#token'); return !!t && t.offsetParent !== null; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if !visible {
		t.Fatal("the admin token field is hidden while the editor is off: Lift cannot be given the token")
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#token`), "s3cret"),
		chromedp.Click(chromedp.CSS(`[data-param-resource="login"] tr:nth-child(2) button.lift`))); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 10*time.Second, "the lift banner", `/Lifted/.test(document.querySelector('#params-result').textContent)`)
	browsertest.Poll(t, ctx, 10*time.Second, "the credential's value, read with the token",
		`document.querySelector('[data-param-resource="quota"] tr:nth-child(2) td.value').textContent === "key-1"`)
	mu.Lock()
	defer mu.Unlock()
	if len(lifted) != 1 || lifted[0] != "login|"+xss {
		t.Errorf("lifted %q, want [login|%s]", lifted, xss)
	}
}

// TestDashboardManyResources: with a document of many resources the
// page draws the most active ones (with their charts) and says how many it
// leaves out, instead of a card and a chart for each of thousands.
func TestDashboardManyResources(t *testing.T) {
	t.Parallel()
	chromium := browsertest.Chromium(t)
	const n = 2000
	stats := make([]ResourceStats, n)
	for i := range stats {
		stats[i] = ResourceStats{Resource: "r" + strconv.Itoa(i)}
	}
	stats[1234].PassQps, stats[1234].BlockQps = 50, 20
	// A route and a param rule per resource.
	var doc strings.Builder
	doc.WriteString("upstreams: { up: { targets: [\"http://127.0.0.1:9001\"] } }\nroutes:\n")
	for i := range n {
		fmt.Fprintf(&doc, "  - { path: \"/r%d\", upstream: up, resource: r%d }\n", i, i)
	}
	doc.WriteString("paramRules:\n")
	for i := range n {
		fmt.Fprintf(&doc, "  - { resource: r%d, param: \"header:X-User\", count: 5 }\n", i)
	}
	cfg, err := config.Parse("rules.yaml", []byte(doc.String()))
	if err != nil {
		t.Fatal(err)
	}
	var paramCalls atomic.Int64
	srv := New(Options{
		State: func() State { return State{Ready: true, Config: cfg, Path: "rules.yaml"} },
		Stats: func() []ResourceStats { return stats },
		Params: func(res string, _ []string, _ int) ([]hotparam.RuleState, bool) {
			paramCalls.Add(1)
			return nil, true
		},
	})
	t0 := time.Now()
	for i := 0; i < 30; i++ {
		srv.hist.record(t0.Add(time.Duration(i-30)*time.Second), stats)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx := browsertest.Tab(t, chromium, 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 20*time.Second, "the busiest resource's chart",
		`(() => { const p = document.querySelector('[data-resource="r1234"] polyline.pass'); return !!p && +p.getAttribute('data-points') > 1; })()`)
	cardsShown, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#resources .card').length`))
	if err != nil {
		t.Fatal(err)
	}
	if cardsShown > 100 {
		t.Errorf("the page draws %d resource cards of %d, want at most a page's worth", cardsShown, n)
	}
	if got := browsertest.Text(t, ctx, `#resources-more`); !strings.Contains(got, "of 2000 resources") {
		t.Errorf("the note on the resources left out reads %q", got)
	}
	// The "who is limited now" panel asks for a page's worth of resources
	// every 2 s, not for each of the 2000 that have a param rule.
	before := paramCalls.Load()
	time.Sleep(4 * time.Second)
	if calls := paramCalls.Load() - before; calls > 300 {
		t.Errorf("the page asked /api/params %d times in 4 s", calls)
	}
}

// TestDashboardParamsOneResourceFails: a resource whose /api/params
// fails (dropped by a reload a moment ago) leaves the others' param rules
// shown.
func TestDashboardParamsOneResourceFails(t *testing.T) {
	t.Parallel()
	chromium := browsertest.Chromium(t)
	cfg := reviewParamsConfig(t)
	srv := New(Options{
		State: func() State { return State{Ready: true, Config: cfg, Path: "rules.yaml"} },
		Params: func(res string, _ []string, _ int) ([]hotparam.RuleState, bool) {
			if res != "login" {
				return nil, false // as for a resource the rules in force no longer have
			}
			return []hotparam.RuleState{{Rule: &cfg.ParamRules[0], Tracked: 1, Values: []hotparam.ValueState{
				{Value: "mallory", Tracked: true, Applies: true, Blocks: 12, Count: 2}}}}, true
		},
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx := browsertest.Tab(t, chromium, 30*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 10*time.Second, "login's blocked value while quota's /api/params is 404",
		`(document.querySelector('[data-param-resource="login"] td.value') || {}).textContent === "mallory"`)
}

// TestDashboardRulesNotRefetchedEverySecond: with a cluster (whose
// Redis pill is refreshed every second) the page does not fetch the whole
// rules document every second, and does not redraw the rules in force
// while they stay the same.
func TestDashboardRulesNotRefetchedEverySecond(t *testing.T) {
	t.Parallel()
	chromium := browsertest.Chromium(t)
	cfg := reviewParamsConfig(t)
	loaded := time.Now()
	srv := New(Options{
		State: func() State {
			return State{Ready: true, Config: cfg, Path: "rules.yaml", LoadedAt: loaded,
				Cluster: map[string]any{"form": "redis", "up": true, "masters": []map[string]any{{"addr": "127.0.0.1:6380", "up": true}}}}
		},
	})
	var full atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/rules" && r.URL.Query().Get("config") != "false" {
			full.Add(1)
		}
		srv.Handler().ServeHTTP(w, r)
	}))
	defer ts.Close()
	ctx := browsertest.Tab(t, chromium, 30*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 10*time.Second, "the Redis pill and the rules", `!document.querySelector('#redis').hidden && !!document.querySelector('#rules table')`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#rules table').dataset.mark = "1", true`)); err != nil {
		t.Fatal(err)
	}
	before := full.Load()
	time.Sleep(6 * time.Second)
	if n := full.Load() - before; n > 2 {
		t.Errorf("the page fetched the whole rules document %d times in 6 s", n)
	}
	same, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(document.querySelector('#rules table') || {dataset: {}}).dataset.mark === "1"`))
	if err != nil {
		t.Fatal(err)
	}
	if !same {
		t.Error("the rules in force were redrawn though they did not change")
	}
}

// TestDashboardLiftButtonSurvivesRefresh: the "who is limited now"
// panel refreshes every 2 s; a Lift button whose row stays is the same
// button afterwards (a click that straddles a refresh is not lost, a
// focused button keeps its focus) while the figures update.
func TestDashboardLiftButtonSurvivesRefresh(t *testing.T) {
	t.Parallel()
	chromium := browsertest.Chromium(t)
	cfg := reviewParamsConfig(t)
	var calls atomic.Int64
	srv := New(Options{
		State: func() State { return State{Ready: true, Config: cfg, Path: "rules.yaml"} },
		Params: func(res string, _ []string, _ int) ([]hotparam.RuleState, bool) {
			if res != "login" {
				return nil, true
			}
			return []hotparam.RuleState{{Rule: &cfg.ParamRules[0], Tracked: 1, Values: []hotparam.ValueState{
				{Value: "mallory", Tracked: true, Applies: true, Blocks: float64(calls.Add(1)), Count: 2}}}}, true
		},
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx := browsertest.Tab(t, chromium, 30*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 10*time.Second, "mallory's Lift button", `!!document.querySelector('[data-param-resource="login"] button.lift')`)
	first, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const b = document.querySelector('[data-param-resource="login"] button.lift'); b.__mark = 1; b.focus();
		return document.querySelector('[data-param-resource="login"] td.blocks').textContent; })()`))
	if err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, ctx, 10*time.Second, "the blocks count refreshed",
		`document.querySelector('[data-param-resource="login"] td.blocks').textContent !== `+strconv.Quote(first))
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const b = document.querySelector('[data-param-resource="login"] button.lift');
		return b.__mark === 1 && document.activeElement === b; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if !kept {
		t.Error("the refresh replaced the Lift button (and its focus)")
	}
}

// TestDashboardSlowParamsDoNotPileUp: while /api/params is slow (a
// cluster Redis that does not answer: each read waits out its 2 s), the
// panel does not start a new round of requests every 2 s on top of the
// ones still running, which queue in the browser without end (and all
// reach the gateway once it answers again).
func TestDashboardSlowParamsDoNotPileUp(t *testing.T) {
	t.Parallel()
	chromium := browsertest.Chromium(t)
	const n = 12
	var doc strings.Builder
	doc.WriteString("upstreams: { up: { targets: [\"http://127.0.0.1:9001\"] } }\nroutes:\n")
	for i := range n {
		fmt.Fprintf(&doc, "  - { path: \"/r%d\", upstream: up, resource: r%d }\n", i, i)
	}
	doc.WriteString("paramRules:\n")
	for i := range n {
		fmt.Fprintf(&doc, "  - { resource: r%d, param: \"header:X-User\", count: 5 }\n", i)
	}
	cfg, err := config.Parse("rules.yaml", []byte(doc.String()))
	if err != nil {
		t.Fatal(err)
	}
	var slow atomic.Bool
	var calls atomic.Int64
	slow.Store(true)
	srv := New(Options{
		State: func() State { return State{Ready: true, Config: cfg, Path: "rules.yaml"} },
		Params: func(string, []string, int) ([]hotparam.RuleState, bool) {
			calls.Add(1)
			if slow.Load() {
				time.Sleep(2 * time.Second)
			}
			return nil, true
		},
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx := browsertest.Tab(t, chromium, 40*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(14 * time.Second)
	before := calls.Load()
	slow.Store(false) // Redis answers again
	time.Sleep(3 * time.Second)
	// In 3 s, what was in flight (at most one round of n) and a round or
	// two more; a backlog is many rounds at once.
	if got := calls.Load() - before; got > 3*n {
		t.Errorf("%d /api/params requests in 3 s once the gateway answered again: the slow rounds had piled up in the browser", got)
	}
}
