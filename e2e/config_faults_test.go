package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// hdWaitEvents waits until the log holds more than n events with msg.
func hdWaitEvents(t *testing.T, g *gateway, msg string, n int) {
	t.Helper()
	admEventually(t, 5*time.Second, fmt.Sprintf("a %q log event (had %d)", msg, n), func() bool {
		return len(g.logs.events(msg)) > n
	})
}

// TestReloadKeepsLastGoodRules: the running gateway meets every kind of bad
// rules file — invalid, empty, deleted, replaced by a directory, 50 MB, and
// a file rewritten 100 times a second for 2 s — and keeps serving the last
// good rules throughout, with the reason on /api/rules; a good file then
// takes effect.
func TestReloadKeepsLastGoodRules(t *testing.T) {
	up := startUpstream(t, nil)
	rules := func(route string) string {
		return rulesFor(up.URL, "routes:\n  - path: "+route+"\n    upstream: up\n")
	}
	good1 := rules("/v1")
	g := startGateway(t, good1)
	inForce := func(what string) {
		t.Helper()
		if resp, _ := get(t, g.URL+"/v1"); resp.StatusCode != 200 {
			t.Errorf("%s: /v1 = %d, want the last good rules (200)", what, resp.StatusCode)
		}
		if resp, _ := get(t, g.URL+"/v2"); resp.StatusCode != 404 {
			t.Errorf("%s: /v2 = %d, want 404", what, resp.StatusCode)
		}
	}
	lastError := func() string {
		var st admRules
		admJSON(t, g.AdminURL+"/api/rules", &st)
		return st.LastError
	}
	writeSparse := func(size int64) {
		tmp := g.Rules + ".big"
		f, err := os.Create(tmp)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := os.Rename(tmp, g.Rules); err != nil {
			t.Fatal(err)
		}
	}
	faults := []struct {
		name    string
		apply   func()
		wantErr string
		undo    func()
	}{
		{"invalid YAML", func() { g.writeRules(good1 + "  - path: [\n") }, "rules.yaml:8: invalid YAML", nil},
		{"unknown field", func() { g.writeRules(good1 + "colour: red\n") }, "rules.yaml:8: colour: unknown field", nil},
		{"empty file", func() { g.writeRules("") }, "rules.yaml: file is empty", nil},
		{"deleted", func() {
			if err := os.Remove(g.Rules); err != nil {
				t.Fatal(err)
			}
		}, "rules.yaml: file does not exist", nil},
		{"directory in its place", func() {
			if err := os.Mkdir(g.Rules, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "rules.yaml: is a directory, not a file", func() {
			if err := os.Remove(g.Rules); err != nil {
				t.Fatal(err)
			}
		}},
		{"50 MB", func() { writeSparse(50 << 20) }, "rules.yaml: file is 52428800 bytes, over the 10 MiB limit", nil},
	}
	for _, f := range faults {
		n := len(g.logs.events("reload failed"))
		f.apply()
		hdWaitEvents(t, g, "reload failed", n)
		if got := lastError(); !strings.Contains(got, f.wantErr) {
			t.Errorf("%s: lastError %q, want it to contain %q", f.name, got, f.wantErr)
		}
		inForce(f.name)
		if f.undo != nil {
			f.undo()
		}
	}

	// 100 writes a second for 2 s, invalid and valid (the same rules, a new
	// comment) alternating, while requests keep coming: all are served by
	// the last good rules; the storm ends on an invalid version.
	stop := time.After(2 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	writes, served := 0, 0
storm:
	for {
		select {
		case <-stop:
			break storm
		case <-tick.C:
		}
		content := fmt.Sprintf("# write %d\n%s", writes, good1)
		if writes%2 == 0 {
			content += "flowRules: [{resource: /v1, count: -1}]\n"
		}
		if err := os.WriteFile(g.Rules, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		writes++
		if writes%10 == 0 {
			if resp, _ := get(t, g.URL+"/v1"); resp.StatusCode != 200 {
				t.Errorf("during the write storm: /v1 = %d", resp.StatusCode)
			}
			served++
		}
	}
	g.writeRules(good1 + "flowRules: [{resource: /v1, count: -1}]\n")
	time.Sleep(300 * time.Millisecond) // past the watcher's debounce
	inForce("after the write storm")
	t.Logf("write storm: %d writes in 2 s, %d requests served meanwhile; reloads ok %d, failed %d",
		writes, served, len(g.logs.events("rules loaded")), len(g.logs.events("reload failed")))

	// A good file comes back: it takes effect.
	n := len(g.logs.events("rules loaded"))
	g.writeRules(rules("/v2"))
	hdWaitEvents(t, g, "rules loaded", n)
	if resp, _ := get(t, g.URL+"/v2"); resp.StatusCode != 200 {
		t.Errorf("after a good file: /v2 = %d, want 200", resp.StatusCode)
	}
	if resp, _ := get(t, g.URL+"/v1"); resp.StatusCode != 404 {
		t.Errorf("after a good file: /v1 = %d, want 404", resp.StatusCode)
	}
	if got := lastError(); got != "" {
		t.Errorf("lastError after a good reload: %q", got)
	}
	hdHealthy(t, g)
}
