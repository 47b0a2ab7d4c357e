package admin_test

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sluice/config"
	"sluice/internal/browsertest"
)

// TestEditorAddsFieldsInRealBrowser: the dashboard's rule editor offers the
// fields a rule does not set yet (errorStatuses and probeNum on a degrade
// rule, burstCount on a flow rule), saves those filled in, and shows what
// validation says of them.
func TestEditorAddsFieldsInRealBrowser(t *testing.T) {
	t.Parallel() // mostly waits (a failover, a browser): overlaps the other waiting tests
	chromium := browsertest.Chromium(t)
	f := newFixture(t, "")
	bctx := browsertest.Tab(t, chromium, 60*time.Second)
	text := func(sel string) string { return browsertest.Text(t, bctx, sel) }
	pick := func(rule string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#rule-select');
			s.value = '` + rule + `'; s.dispatchEvent(new Event('change')); })()`)
	}
	field := func(name string) string { return `#editor-fields [name="` + name + `"]` }
	// save sets the fields (by name) and saves; it waits for the result.
	save := func(ok bool, values ...string) string {
		t.Helper()
		var acts []chromedp.Action[chromedp.Void]
		for i := 0; i+1 < len(values); i += 2 {
			acts = append(acts, chromedp.SetValue(chromedp.CSS(field(values[i])), values[i+1]))
		}
		want := `#result.err`
		if ok {
			want = `#result.ok`
		}
		acts = append(acts, chromedp.Evaluate[chromedp.Void](`document.querySelector('#result').className = ''`),
			chromedp.Click(chromedp.CSS(`#save`)), chromedp.WaitVisible(chromedp.CSS(want)))
		if err := chromedp.Do(bctx, acts...); err != nil {
			t.Fatalf("save %v: %v (editor says %q)", values, err, text(`#result`))
		}
		res := text(`#result`)
		if ok {
			// The editor re-reads the file after a save: wait until it shows
			// the fields saved as set, so that the next step acts on it.
			var cond []string
			for i := 0; i+1 < len(values); i += 2 {
				el := `document.querySelector('` + field(values[i]) + `')`
				cond = append(cond, el+` && !`+el+`.dataset.unset`)
			}
			browsertest.Poll(t, bctx, 10*time.Second, "the editor shows the saved fields", strings.Join(cond, " && "))
		}
		return res
	}

	if err := chromedp.Do(bctx, chromedp.Navigate(f.ts.URL+"/")); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, bctx, 20*time.Second, "the editor lists degradeRules[0]",
		`!!document.querySelector('#rule-select option[value="degradeRules/0"]')`)
	if err := chromedp.Do(bctx, pick("degradeRules/0")); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, bctx, 10*time.Second, "the editor offers errorStatuses on degradeRules[0]",
		`!!document.querySelector('`+field("errorStatuses")+`')`)
	for _, name := range []string{"errorStatuses", "probeNum"} {
		ph, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('`+field(name)+`').placeholder`))
		if err != nil || ph != "not set" {
			t.Errorf("%s offered with placeholder %q (%v), want \"not set\"", name, ph, err)
		}
	}
	before := f.file(t)
	if got := save(false, "errorStatuses", `["6xx"]`, "probeNum", "3"); !strings.Contains(got, "422") ||
		!strings.Contains(got, `degradeRules[0].errorStatuses[0]: must be a status code`) {
		t.Errorf("an invalid errorStatuses showed %q, want the 422 and the error line", got)
	}
	if string(f.file(t)) != string(before) {
		t.Fatal("an invalid edit changed rules.yaml")
	}
	got := save(true, "errorStatuses", `["5xx", 429]`, "probeNum", "3")
	t.Logf("editor says: %s", got)
	cfg, err := config.Load(f.path)
	if err != nil {
		t.Fatalf("rules.yaml after the edit: %v", err)
	}
	if d := cfg.DegradeRules[0]; !reflect.DeepEqual(d.ErrorStatuses, []string{"5xx", "429"}) || d.ProbeNum != 3 {
		t.Errorf("degradeRules[0] after the edit: errorStatuses %q probeNum %d, want [5xx 429] and 3", d.ErrorStatuses, d.ProbeNum)
	}

	// burstCount on a reject rule is refused; with throttle it is saved.
	if err := chromedp.Do(bctx, pick("flowRules/1")); err != nil {
		t.Fatal(err)
	}
	browsertest.Poll(t, bctx, 10*time.Second, "the editor offers burstCount on flowRules[1]",
		`!!document.querySelector('`+field("burstCount")+`')`)
	if got := save(false, "burstCount", "4"); !strings.Contains(got, "flowRules[1].burstCount: is only used with controlBehavior throttle") {
		t.Errorf("burstCount on a reject rule showed %q, want the error line", got)
	}
	save(true, "burstCount", "4", "controlBehavior", "throttle")
	if cfg, err = config.Load(f.path); err != nil {
		t.Fatalf("rules.yaml after the edit: %v", err)
	}
	if r := cfg.FlowRules[1]; r.BurstCount != 4 || r.ControlBehavior != config.BehaviorThrottle {
		t.Errorf("flowRules[1] after the edit: burstCount %d controlBehavior %s, want 4 throttle", r.BurstCount, r.ControlBehavior)
	}
	data, _ := os.ReadFile(f.path)
	t.Logf("rules.yaml after the edits:\n%s", data)
}
