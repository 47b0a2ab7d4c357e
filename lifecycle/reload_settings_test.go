package lifecycle

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"sluice/admin"
	"sluice/config"
)

// TestRulesInForceKeepStartOnlySettings: after a reload that changes
// start-only settings, the rules shown as in force (GET /api/rules) keep
// the values the gateway runs with, list the changed ones as waiting for
// the restart, and still show the reload's live changes. Showing the
// file's new listen address told operators the gateway listened where it
// did not.
func TestRulesInForceKeepStartOnlySettings(t *testing.T) {
	up := upstream(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write := func(listen, extra string) {
		t.Helper()
		body := fmt.Sprintf("listen: %q\nupstreams: {app: {targets: [%q]}}\nroutes: [{path: /a, upstream: app, resource: a}]\n%s\n", listen, up, extra)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const startOnly = "log: {level: info}\nhttp2: {h2c: false}\nserver: {idleTimeout: 2m}\n"
	write("127.0.0.1:0", startOnly)
	var log logs
	inst, err := New(Options{Config: path, Admin: "off", Log: &log})
	if err != nil {
		t.Fatalf("New: %v\n%s", err, log.String())
	}
	t.Cleanup(func() { inst.lns.traffic.close(); inst.close() })
	if st := inst.adminState(); len(st.PendingRestart) != 0 {
		t.Fatalf("at start: pendingRestart %v, want none", st.PendingRestart)
	}

	write("127.0.0.1:1", "log: {level: debug}\nhttp2: {h2c: true}\nserver: {idleTimeout: 1m}\nflowRules: [{resource: a, count: 7}]\n")
	if err := inst.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	st := inst.adminState()
	cfg, ok := st.Config.(*config.Config)
	if !ok {
		t.Fatalf("state's config is %T", st.Config)
	}
	if cfg.Listen != "127.0.0.1:0" || cfg.Log.Level != "info" || cfg.HTTP2.H2C || cfg.Server.IdleTimeout.String() != "2m0s" {
		t.Errorf("rules in force show listen %q, log.level %q, http2.h2c %v, server.idleTimeout %v; want the values the gateway started with (127.0.0.1:0, info, false, 2m0s)",
			cfg.Listen, cfg.Log.Level, cfg.HTTP2.H2C, cfg.Server.IdleTimeout)
	}
	if len(cfg.FlowRules) != 1 || cfg.FlowRules[0].Count != 7 {
		t.Errorf("rules in force show flowRules %+v, want the reloaded rule (count 7)", cfg.FlowRules)
	}
	want := []admin.PendingSetting{
		{Setting: "listen", Old: "127.0.0.1:0", New: "127.0.0.1:1"},
		{Setting: "log.level", Old: "info", New: "debug"},
		{Setting: "http2.h2c", Old: "false", New: "true"},
		{Setting: "server.idleTimeout", Old: "2m0s", New: "1m0s"},
	}
	if fmt.Sprint(st.PendingRestart) != fmt.Sprint(want) {
		t.Errorf("pendingRestart %v, want %v", st.PendingRestart, want)
	}
	if got := inst.proxy.Current().Config; got.Listen != "127.0.0.1:1" {
		t.Errorf("the gateway's own snapshot has listen %q: showing the rules in force must not change it", got.Listen)
	}

	// Back to the values in force: nothing waits for a restart.
	write("127.0.0.1:0", startOnly+"flowRules: [{resource: a, count: 7}]\n")
	if err := inst.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if st := inst.adminState(); len(st.PendingRestart) != 0 {
		t.Errorf("after changing them back: pendingRestart %v, want none", st.PendingRestart)
	}
}

// TestInForceKeepsEveryStartOnlySetting: every start-only setting has a
// keep that puts the started value back, and leaves the config it copies
// alone; a setting added to startSettings without one would show the
// file's value again.
func TestInForceKeepsEveryStartOnlySetting(t *testing.T) {
	const started = `listen: ":8080"
admin: {listen: "127.0.0.1:9090"}
log: {level: info, format: json}
tls: {listen: ":8443", certificates: [{certFile: a.pem, keyFile: a.key}], minVersion: "1.2", clientCAFile: ca.pem, redirectHttp: false, strictSni: false}
http2: {tls: true, h2c: false}
server: {readHeaderTimeout: 10s, idleTimeout: 2m, maxConcurrentStreams: 100}
cluster: {redis: "redis://u:pw@10.0.0.1:6379/0", sentinel: {masterName: m, addrs: ["10.0.0.1:26379"]}, clusterAddrs: ["10.0.0.1:7000"], namespace: a, timeout: 20ms}
rulesSource: {redis: "redis://10.0.0.1:6379/1", sentinel: {masterName: m, addrs: ["10.0.0.1:26379"]}, clusterAddrs: ["10.0.0.1:7000"], key: k, cacheFile: c.json}
`
	const changed = `listen: ":8081"
admin: {listen: "127.0.0.1:9091"}
log: {level: debug, format: console}
tls: {listen: ":9443", certificates: [{certFile: b.pem, keyFile: b.key}], minVersion: "1.3", clientCAFile: ca2.pem, redirectHttp: true, strictSni: true}
http2: {tls: false, h2c: true}
server: {readHeaderTimeout: 5s, idleTimeout: 1m, maxConcurrentStreams: 3}
cluster: {redis: "redis://u:pw@10.0.0.2:6379/0", sentinel: {masterName: n, addrs: ["10.0.0.2:26379"]}, clusterAddrs: ["10.0.0.2:7000"], namespace: b, timeout: 200ms}
rulesSource: {redis: "redis://10.0.0.2:6379/1", sentinel: {masterName: n, addrs: ["10.0.0.2:26379"]}, clusterAddrs: ["10.0.0.2:7000"], key: k2, cacheFile: c2.json}
`
	var start, next config.Config
	for doc, c := range map[string]*config.Config{started: &start, changed: &next} {
		if err := yaml.Unmarshal([]byte(doc), c); err != nil {
			t.Fatal(err)
		}
	}
	shown := inForce(&start, &next)
	for _, s := range startSettings() {
		if s.value(&start) == s.value(&next) {
			t.Errorf("%s: the test's two files do not differ in it", s.name)
			continue
		}
		if got, want := s.value(shown), s.value(&start); got != want {
			t.Errorf("%s shown as in force: %q, want the started %q", s.name, got, want)
		}
		if got := s.value(&next); got == s.value(&start) {
			t.Errorf("%s: inForce changed the config it copies", s.name)
		}
	}
	if n := len(pendingRestart(&start, &next)); n != len(startSettings()) {
		t.Errorf("pendingRestart lists %d settings, want every one of the %d", n, len(startSettings()))
	}
}

// TestClusterModeLocalWarningOnce: on a gateway started without cluster
// Redis, the warning that clusterMode rules are checked locally is logged
// when a reload brings such a rule, not again at each reload that keeps
// it, and again when a reload brings another one or brings one back.
func TestClusterModeLocalWarningOnce(t *testing.T) {
	const cluster = "cluster: {redis: \"redis://127.0.0.1:6379/0\"}\n"
	files := []struct {
		name, body string
		warned     string // the resource named by a warning; "" for none
	}{
		{"a clusterMode rule added", cluster + "flowRules: [{resource: a, count: 5, clusterMode: true}]", "a"},
		{"an unrelated edit", cluster + "# a comment\nflowRules: [{resource: a, count: 5, clusterMode: true}]\nsystem: {maxQps: 1000}", ""},
		{"the rule's count changed", cluster + "flowRules: [{resource: a, count: 6, clusterMode: true}]", ""},
		{"another clusterMode rule added", cluster + "flowRules: [{resource: a, count: 6, clusterMode: true}, {resource: b, count: 5, clusterMode: true}]", "b"},
		{"a param rule on the same resource", cluster + "flowRules: [{resource: a, count: 6, clusterMode: true}, {resource: b, count: 5, clusterMode: true}]\nparamRules: [{resource: a, param: header:X-Key, count: 2, clusterMode: true}]", "a"},
		{"the clusterMode rules removed", cluster + "flowRules: [{resource: a, count: 6}]", ""},
		{"one back", cluster + "flowRules: [{resource: a, count: 6, clusterMode: true}]", "a"},
		{"kept again", cluster + "flowRules: [{resource: a, count: 6, clusterMode: true}]\nsystem: {maxQps: 1000}", ""},
	}
	parse := func(extra string) *config.Config {
		t.Helper()
		cfg, err := config.Parse("rules.yaml", []byte(extra+"\nupstreams: {app: {targets: [\"http://127.0.0.1:9001\"]}}\n"+
			"routes: [{path: /a, upstream: app, resource: a}, {path: /b, upstream: app, resource: b}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var buf bytes.Buffer
	r := &reloader{log: zerolog.New(&buf), clusterOn: false, setToken: func(string) {}}
	started := parse("")
	prev := started
	for _, f := range files {
		next := parse(f.body)
		buf.Reset()
		r.announceSettings(started, prev, next)
		var warned []string
		for _, ev := range events(t, &buf) {
			if msg, _ := ev["message"].(string); strings.HasPrefix(msg, "clusterMode rule checked locally") {
				res, _ := ev["resource"].(string)
				warned = append(warned, res)
			}
		}
		want := []string(nil)
		if f.warned != "" {
			want = []string{f.warned}
		}
		if fmt.Sprint(warned) != fmt.Sprint(want) {
			t.Errorf("%s: warnings for %q, want %q", f.name, warned, want)
		}
		prev = next
	}

	// A gateway with the cluster token service never warns.
	buf.Reset()
	on := &reloader{log: zerolog.New(&buf), clusterOn: true, setToken: func(string) {}}
	on.announceSettings(started, started, parse(files[0].body))
	if strings.Contains(buf.String(), "clusterMode rule checked locally") {
		t.Errorf("warned with the cluster service on: %s", buf.String())
	}
}

// TestRulesShowFlagSettings: with -log-level, -log-format or
// -read-header-timeout given, GET /api/rules showed the file's value, not
// the one in force, before and after a reload (only -listen and -admin
// replaced the file's). Now every such flag replaces the file's setting as
// config reads it, so the rules shown carry the flag's value, a reload
// lists no change to it as pending, and the file's replaced value is never
// checked.
func TestRulesShowFlagSettings(t *testing.T) {
	up := upstream(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write := func(extra string) {
		t.Helper()
		body := fmt.Sprintf("listen: 127.0.0.1:0\nupstreams: {app: {targets: [%q]}}\nroutes: [{path: /a, upstream: app, resource: a}]\n%s\n", up, extra)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("log: {level: info, format: console}\nserver: {readHeaderTimeout: 3s}")
	var log logs
	inst, err := New(Options{Config: path, Admin: "off", Log: &log, LogLevel: "warn", LogFormat: "json", ReadHeaderTimeout: 7 * time.Second})
	if err != nil {
		t.Fatalf("New: %v\n%s", err, log.String())
	}
	t.Cleanup(func() { inst.lns.traffic.close(); inst.close() })
	shown := func(when string) {
		t.Helper()
		st := inst.adminState()
		cfg := st.Config.(*config.Config)
		if cfg.Log.Level != "warn" || cfg.Log.Format != "json" || cfg.Server.ReadHeaderTimeout.D() != 7*time.Second {
			t.Errorf("%s: rules show log.level %q, log.format %q, server.readHeaderTimeout %v; want the flags' warn, json, 7s",
				when, cfg.Log.Level, cfg.Log.Format, cfg.Server.ReadHeaderTimeout.D())
		}
		if len(st.PendingRestart) != 0 {
			t.Errorf("%s: pendingRestart %v, want none (the flags fix these settings)", when, st.PendingRestart)
		}
	}
	shown("at start")
	// A reload with other values, one the file could not even hold, for
	// the settings the flags replace.
	write("log: {level: loud, format: console}\nserver: {readHeaderTimeout: 1s}\nflowRules: [{resource: a, count: 7}]")
	if err := inst.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	shown("after a reload")
}
