package e2e

import (
	"context"
	"encoding/base64"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/internal/browsertest"
)

// TestParamsPanelLiftsAValue: in headless Chromium, the dashboard's "who is
// limited now" panel shows a blocked user of the real gateway (and a
// hostile one as text), the Lift button, with the admin token typed in
// the editor's field as every write takes it, lifts the user, and its
// next logins pass and reach the upstream.
func TestParamsPanelLiftsAValue(t *testing.T) {
	chromium := browsertest.Chromium(t)
	uc := &userCounter{seen: map[string]int{}}
	up := startUpstream(t, uc.handle)
	t.Chdir(t.TempDir())
	if err := os.WriteFile("rules.yaml", []byte(rulesFor(up.URL, loginRules+"admin:\n  token: letmein\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGatewayFile(t, "rules.yaml")
	const hostile = `<img src=x onerror="window.pwned=1">`
	login(t, g, "mallory", 6)
	login(t, g, hostile, 4)
	if got := login(t, g, "mallory", 1); got != 0 {
		t.Fatal("mallory not blocked before the lift")
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	actx, cancelAlloc := browsertest.Allocator(ctx, t, chromium)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 60*time.Second)
	defer cancelTimeout()

	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	row := func(v string) string {
		return `document.querySelector('[data-param-resource="login"] tr[data-value-b64="` + b64(v) + `"]')`
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(g.AdminURL+"/"),
		chromedp.Poll[chromedp.Void](row("mallory")+` && `+row(hostile),
			chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)),
	); err != nil {
		t.Fatalf("the panel never listed mallory and the hostile user: %v", err)
	}
	type panel struct {
		Mallory, Hostile, Blocks string
		Imgs                     int
		Pwned                    bool
	}
	shown, err := chromedp.Run(bctx, chromedp.Evaluate[panel](`({
		mallory: `+row("mallory")+`.querySelector("td.value").textContent,
		blocks: `+row("mallory")+`.querySelector("td.blocks").textContent,
		hostile: `+row(hostile)+`.querySelector("td.value").textContent,
		imgs: document.querySelectorAll("#params img").length,
		pwned: window.pwned === 1,
	})`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("panel: %+v", shown)
	if shown.Mallory != "mallory" || shown.Blocks != "5" || shown.Hostile != hostile || shown.Imgs != 0 || shown.Pwned {
		t.Fatalf("panel shows %+v; want mallory with blocks, the hostile value as text, no <img>, no script run", shown)
	}

	// Without the token the lift is refused and says so.
	// Clicked from the page's own script: the panel redraws every 2 s,
	// and a button found by the driver could be replaced before its click.
	lift := func() {
		t.Helper()
		found, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => { const b = document.querySelector(`+
			`'[data-param-resource="login"] button.lift[data-value-b64="`+b64("mallory")+`"]'); if (b) b.click(); return !!b; })()`))
		if err != nil || !found {
			t.Fatalf("no Lift button for mallory (%v)", err)
		}
	}
	lift()
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(`#params-result.bad`)),
	); err != nil {
		t.Fatalf("lifting mallory without the token: %v", err)
	}
	if msg := browsertest.Text(t, bctx, `#params-result`); !strings.HasPrefix(msg, "401") {
		t.Errorf("without the token the page says %q, want a 401", msg)
	}
	if got := login(t, g, "mallory", 1); got != 0 {
		t.Fatal("a lift without the token lifted mallory")
	}

	// Lift mallory with the admin token, as the editor's writes take it.
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS(`#token`), "letmein")); err != nil {
		t.Fatal(err)
	}
	lift()
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(`#params-result.ok`)),
	); err != nil {
		t.Fatalf("lifting mallory: %v (page says %q)", err, browsertest.Text(t, bctx, `#params-result`))
	}
	t.Logf("page says: %s", browsertest.Text(t, bctx, `#params-result`))
	before := uc.of("mallory")
	if got := login(t, g, "mallory", 3); got != 2 || uc.of("mallory") != before+2 {
		t.Errorf("after the lift mallory passed %d of 3 (want 2), the upstream saw %d more (want 2)", got, uc.of("mallory")-before)
	}
	if got := login(t, g, hostile, 1); got != 0 {
		t.Error("lifting mallory lifted the other user too")
	}
}
