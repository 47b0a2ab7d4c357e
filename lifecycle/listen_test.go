package lifecycle

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/internal/redistest"
)

// TestFlagsOverrideFileListeners: SPEC 2 "Flags override the file's listen
// / admin.listen" (docs/configuration.md: "-admin off turns the admin
// listener off"). A file value a flag replaces is never used, so it stops
// neither the start, nor a reload, nor the editor's check of an edit.
func TestFlagsOverrideFileListeners(t *testing.T) {
	const rest = "upstreams: {app: {targets: [\"http://127.0.0.1:1\"]}}\nroutes: [{path: /a, upstream: app}]\n"
	for _, tt := range []struct {
		name, file    string
		listen, admin string
	}{
		// The file's listen takes admin.listen's default port.
		{"listen on the admin default port, both flagged", "listen: \"127.0.0.1:9090\"\n" + rest, "127.0.0.1:0", "127.0.0.1:0"},
		{"listen on the admin default port, -admin off", "listen: \"127.0.0.1:9090\"\n" + rest, "127.0.0.1:0", "off"},
		{"a bad admin.listen replaced by -admin", "listen: \"127.0.0.1:0\"\nadmin: {listen: \"bogus\"}\n" + rest, "", "127.0.0.1:0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			var log logs
			o := Options{Config: path, Listen: tt.listen, Admin: tt.admin, Log: &log, Drain: time.Second}
			inst, _ := running(t, o)
			if _, _, admin := inst.Addrs(); (admin == "") != (tt.admin == "off") {
				t.Errorf("admin listener %q with -admin %q", admin, tt.admin)
			}
			if err := inst.Reload(); err != nil {
				t.Errorf("Reload: %v; want the flags to override the file again", err)
			}
			data := []byte(tt.file + "flowRules: [{resource: /a, count: 10}]\n")
			if err := o.checkRules(path, data); err != nil {
				t.Errorf("the editor's check of an edit: %v", err)
			}
		})
	}
}

// TestStartedEventLogsChosenAdminAddress: docs/configuration.md "Port 0
// picks a free port; the chosen addresses are logged in the `sluice
// started` and `admin listening` events": the admin address as chosen,
// not "127.0.0.1:0".
func TestStartedEventLogsChosenAdminAddress(t *testing.T) {
	path, _ := rulesFile(t, upstream(t), "routes: [{path: /a, upstream: app}]")
	var log logs
	inst, plain := running(t, Options{Config: path, Admin: "127.0.0.1:0", Log: &log, Drain: time.Second})
	_, _, admin := inst.Addrs()
	redistest.WaitFor(t, 5*time.Second, "the sluice started event", func() bool {
		return strings.Contains(log.String(), `"sluice started"`)
	})
	for line := range strings.SplitSeq(log.String(), "\n") {
		var ev struct{ Message, Admin, Listen string }
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Message != "sluice started" {
			continue
		}
		if ev.Admin != admin || ev.Listen != plain {
			t.Errorf("sluice started: admin %q, listen %q; want the addresses chosen, %q and %q", ev.Admin, ev.Listen, admin, plain)
		}
		return
	}
}
