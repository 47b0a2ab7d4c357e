package lifecycle

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestEditReloadsOnce: an edit through the admin API writes the file and
// asks for a reload; the file watch then sees the same write. The watch's
// reload of a file already read was a second one: two "rules loaded" lines
// and sluice_rules_reloads_total counting 2 for one save. A write the
// reload did not read (another edit of the file) still reloads.
func TestEditReloadsOnce(t *testing.T) {
	path, write := rulesFile(t, upstream(t), "routes: [{path: /a, upstream: app, resource: a}]\nflowRules:\n  - resource: a\n    count: 5")
	inst, _ := running(t, Options{Config: path, Admin: "127.0.0.1:0", Log: io.Discard, Drain: time.Second})
	_, _, admin := inst.Addrs()
	base := "http://" + admin
	reloads := func() int {
		t.Helper()
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), `sluice_rules_reloads_total{result="ok"} `); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		return 0
	}
	before := reloads()
	resp, err := http.Get(base + "/api/rules/raw")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest("PUT", base+"/api/rules/flowRules/0", strings.NewReader(`{"count": 7}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("If-Match", resp.Header.Get("ETag"))
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	resp.Body.Close()
	time.Sleep(time.Second) // ten times the watch's debounce
	if got := reloads() - before; got != 1 {
		t.Errorf("one edit reloaded %d times, want 1", got)
	}
	write("routes: [{path: /a, upstream: app, resource: a}]\nflowRules:\n  - resource: a\n    count: 9")
	time.Sleep(time.Second)
	if got := reloads() - before; got != 2 {
		t.Errorf("a write to the file after the edit: %d reloads in all, want 2", got)
	}
}
