package admin_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/admin"
	"sluice/config"
	"sluice/internal/browsertest"
)

// The fleet view in a real browser: every gateway with its version and
// rates, the fleet's totals, a gateway behind the newest version marked; the
// editor saves to the shared document as its next version and shows a 409
// when another writer came first.
func TestFleetViewInRealBrowser(t *testing.T) {
	t.Parallel() // mostly waits (a failover, a browser): overlaps the other waiting tests
	chromium := browsertest.Chromium(t)
	doc := &memDoc{version: 3, text: []byte(fleetDocument)}
	var mu sync.Mutex
	fleet := []admin.FleetGateway{
		{ID: "gw-a", Listen: "127.0.0.1:8081", Version: 3, PassQps: 40, BlockQps: 10},
		{ID: "gw-b", Listen: "127.0.0.1:8082", Version: 3, PassQps: 35.5, BlockQps: 4.5},
		{ID: "gw-c", Listen: "127.0.0.1:8083", Version: 2, PassQps: 20, BlockQps: 0},
	}
	state := func() admin.State {
		v, text := doc.get()
		cfg, err := config.ParseWithDocument("rules.yaml", []byte(gatewayFile), docName, []byte(text))
		if err != nil {
			t.Errorf("document in force: %v", err)
		}
		now := time.Now()
		return admin.State{Ready: true, Config: cfg, Path: "rules.yaml", LoadedAt: now, LastReload: now,
			Source: &admin.SourceState{Name: docName, Version: v, Up: true, LastSeen: &now, Cache: "rules.last-good.yaml"}}
	}
	srv := admin.New(admin.Options{
		ConfigPath: "rules.yaml",
		Document:   doc,
		State:      state,
		Fleet: func(context.Context) ([]admin.FleetGateway, error) {
			mu.Lock()
			defer mu.Unlock()
			out := append([]admin.FleetGateway(nil), fleet...)
			for i := range out {
				out[i].LastSeen = time.Now().Add(-300 * time.Millisecond)
			}
			return out, nil
		},
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	bctx := browsertest.Tab(t, chromium, 60*time.Second)
	poll := func(what, js string) { t.Helper(); browsertest.Poll(t, bctx, 15*time.Second, what, js) }
	text := func(sel string) string { return browsertest.Text(t, bctx, sel) }

	if err := chromedp.Do(bctx, chromedp.Navigate(ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	poll("the fleet table lists three gateways", `document.querySelectorAll('#fleet-table tr[data-gateway]').length === 3`)
	// Each cell is polled, not read once: under a busy machine one read
	// came back "" for a total the same render had set.
	for _, c := range []struct{ what, sel, want string }{
		{"fleet pass/s total", `[data-total="pass/s"] .v`, "95.5"},
		{"fleet block/s total", `[data-total="block/s"] .v`, "14.5"},
		{"gw-c version cell", `tr[data-gateway="gw-c"] [data-k="version"]`, "v2 (behind)"},
		{"gw-b block/s", `tr[data-gateway="gw-b"] [data-k="blockQps"]`, "4.50"},
	} {
		poll(fmt.Sprintf("%s is %q", c.what, c.want),
			fmt.Sprintf(`document.querySelector(%q)?.textContent === %q`, c.sel, c.want))
	}
	t.Logf("fleet state: %s", text(`#fleet-state`))

	// gw-c catches up and gw-b leaves: the view follows within a refresh.
	mu.Lock()
	fleet[2].Version = 3
	fleet = append(fleet[:1], fleet[2])
	mu.Unlock()
	poll("the view follows the heartbeats", `document.querySelectorAll('#fleet-table tr[data-gateway]').length === 2 && !document.querySelector('#fleet-table tr.behind')`)

	// The editor saves to the shared document as its next version.
	count := chromedp.CSS(`#editor-fields input[name="count"]`)
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(count),
		chromedp.SetValue(chromedp.CSS(`#rule-select`), "flowRules/0"),
		chromedp.SetValue(count, "250"),
		chromedp.Click(chromedp.CSS(`#save`)),
		chromedp.WaitVisible(chromedp.CSS(`#result.ok`)),
	); err != nil {
		t.Fatalf("save: %v", err)
	}
	if v, got := doc.get(); v != 4 || !strings.Contains(got, "count: 250 # for the sale") {
		t.Fatalf("document after the save: version %d\n%s", v, got)
	}
	// The page shows the result, then re-reads the document (and rebuilds
	// the editor's fields): wait for that before the next edit, which would
	// otherwise be typed into fields about to be replaced.
	poll("the editor re-read version 4 after the save", `document.querySelector('#etag').textContent === "document version 4"`)
	// Another writer (sluice rules push) stores version 5: the next save is a 409.
	doc.store(strings.Replace(fleetDocument, "count: 20", "count: 21", 1))
	if err := chromedp.Do(bctx,
		chromedp.SetValue(count, "300"),
		chromedp.Click(chromedp.CSS(`#save`)),
		chromedp.WaitVisible(chromedp.CSS(`#result.err`)),
	); err != nil {
		t.Fatalf("stale save: %v", err)
	}
	if got := text(`#result`); !strings.Contains(got, "409") || !strings.Contains(got, "another writer") {
		t.Errorf("stale save showed %q, want the 409", got)
	}
	if v, got := doc.get(); v != 5 || !strings.Contains(got, "count: 21") {
		t.Fatalf("the other writer's version was lost: version %d\n%s", v, got)
	}
	t.Logf("editor says: %s", text(`#result`))
}
