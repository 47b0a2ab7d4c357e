package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hdWaitEvents waits until the log holds more than n events with msg.
func hdWaitEvents(t *testing.T, g *gateway, msg string, n int) {
	t.Helper()
	poll(t, 5*time.Second, fmt.Sprintf("a %q log event (had %d)", msg, n), func() bool {
		return len(g.logs.Events(msg)) > n
	})
}

// TestReloadKeepsLastGoodRules: the running gateway meets every kind of bad
// rules file — invalid, empty, deleted, replaced by a directory, over 8 MiB
// (9 MiB and 64 MiB), and
// a file rewritten 100 times a second for 2 s — and keeps serving the last
// good rules throughout, with the reason on /api/rules; a good file then
// takes effect.
func TestReloadKeepsLastGoodRules(t *testing.T) {
	t.Parallel()
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
		{"9 MiB", func() { writeSparse(9 << 20) }, "rules.yaml: file is 9437184 bytes, over the 8 MiB limit of a rules document", nil},
		{"64 MiB", func() { writeSparse(64 << 20) }, "rules.yaml: file is 67108864 bytes, over the 8 MiB limit of a rules document", nil},
	}
	for _, f := range faults {
		n := len(g.logs.Events("reload failed"))
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
		writes, served, len(g.logs.Events("rules loaded")), len(g.logs.Events("reload failed")))

	// A good file comes back: it takes effect.
	n := len(g.logs.Events("rules loaded"))
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

// TestRulesFileOver8MiBRefusedAtStart: a rules file over 8 MiB (SPEC §3
// Reload) is refused from its size, before it is read: the gateway exits 1
// at once with a message naming the file and the limit, and its peak RSS is
// that of a gateway refusing a one-line invalid file (reading the 9 MiB
// file put 24 MiB on it).
func TestRulesFileOver8MiBRefusedAtStart(t *testing.T) {
	// refuse starts the gateway on path and returns its output, its exit
	// error, how long it ran and its peak RSS in bytes (0: not measured).
	// GNU time measures it: a child of the test process itself would
	// report the test's own RSS, which it shares until exec.
	timeBin, _ := exec.LookPath("/usr/bin/time")
	refuse := func(path string) (string, error, time.Duration, int64) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		args := []string{"-config", path, "-listen", "127.0.0.1:0", "-admin", "off", "-log-format", "json"}
		cmd := exec.CommandContext(ctx, binary, args...)
		rssFile := path + ".rss"
		if timeBin != "" {
			cmd = exec.CommandContext(ctx, timeBin, append([]string{"-o", rssFile, "-f", "%M", binary}, args...)...)
		}
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		var kib int64
		if b, rerr := os.ReadFile(rssFile); rerr == nil {
			// The last line: time writes "Command exited with non-zero status 1" first.
			lines := strings.Fields(string(b))
			if len(lines) > 0 {
				kib, _ = strconv.ParseInt(lines[len(lines)-1], 10, 64)
			}
		}
		return string(out), err, took, kib << 10
	}
	dir := t.TempDir()
	small := filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(small, []byte("listen: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, _, base := refuse(small)
	for _, size := range []int64{9 << 20, 64 << 20} {
		t.Run(fmt.Sprintf("%d MiB", size>>20), func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("rules-%d.yaml", size>>20))
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(size); err != nil { // sparse: nothing on disk
				t.Fatal(err)
			}
			f.Close()
			out, err, took, rss := refuse(path)
			want := fmt.Sprintf("%s: file is %d bytes, over the 8 MiB limit of a rules document", path, size)
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(out, want) || !strings.Contains(out, "not starting") {
				t.Fatalf("the gateway with a %d MiB file: %v, output:\n%s\nwant exit 1 and %s", size>>20, err, out, want)
			}
			t.Logf("%d MiB file refused in %v, peak RSS %d KiB (%d KiB refusing a one-line file)", size>>20, took.Round(time.Millisecond), rss>>10, base>>10)
			if timeBin == "" {
				t.Log("no /usr/bin/time: the peak RSS is not measured")
			} else if rss == 0 || base == 0 {
				t.Errorf("/usr/bin/time measured no RSS (%d, %d)", rss, base)
			} else if rss > base+8<<20 {
				t.Errorf("peak RSS %d MiB refusing a %d MiB file, %d MiB refusing a one-line file: the file was read", rss>>20, size>>20, base>>20)
			}
			if took > 3*time.Second {
				t.Errorf("refusing a %d MiB file took %v, want well under a second (3 s on a busy machine)", size>>20, took)
			}
		})
	}
}

// TestEditorRefusesOversizedEdits: the admin editor answers 413, naming the
// limit, to an edit whose body is over 1 MiB and to one that would make the
// rules file over 8 MiB; the file stays as it was and the rules in force
// keep serving.
func TestEditorRefusesOversizedEdits(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, nil)
	good := rulesFor(up.URL, "routes:\n  - path: /v1\n    upstream: up\n    resource: v1\nflowRules:\n  - resource: v1\n    count: 100\n")
	// Padded with a comment to 100 KiB under the limit: an edit that adds
	// 200 KiB makes it too large.
	padded := good + "# " + strings.Repeat("x", 8<<20-100<<10-len(good)-3) + "\n"
	g := startGateway(t, padded)
	for _, c := range []struct{ name, body, want string }{
		{"body over 1 MiB", `{"limitApp": "` + strings.Repeat("a", 2<<20) + `"}`,
			"admin: the request body is over the 1 MiB limit of a rule edit; nothing was written"},
		{"file over 8 MiB", `{"limitApp": "` + strings.Repeat("a", 200<<10) + `"}`,
			fmt.Sprintf("admin: the edited rules file is %d bytes, over the 8 MiB limit of a rules document; nothing was written", len(padded)+200<<10+len("    limitApp: \n"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			etag, _ := admETag(t, g)
			code, body := admEdit(t, g, "flowRules/0", etag, c.body)
			var e struct{ Error string }
			_ = json.Unmarshal([]byte(body), &e)
			if code != 413 || e.Error != c.want {
				t.Errorf("PUT: %d %.300s, want 413 %q", code, body, c.want)
			}
			if admReadRules(t, g) != padded {
				t.Error("the rules file changed")
			}
			if resp, _ := get(t, g.URL+"/v1"); resp.StatusCode != 200 {
				t.Errorf("GET /v1 = %d after a refused edit, want 200", resp.StatusCode)
			}
		})
	}
}
