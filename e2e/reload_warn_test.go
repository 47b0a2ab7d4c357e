package e2e

import (
	"strings"
	"testing"
)

// A reload that needs a restart to take full effect says so (log.level and
// log.format are read at start), and breaker
// states are exported from the first load, not only after a change.
func TestReloadWarnsWhatNeedsARestart(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, nil)
	rules := func(listen, level string, cluster bool) string {
		s := "listen: \"" + listen + "\"\nlog: {level: " + level + "}\n" + rulesFor(up.URL, `
routes:
  - path: /q
    upstream: up
    resource: q
degradeRules:
  - resource: q
    strategy: errorCount
    threshold: 5
`)
		if cluster {
			s += `flowRules:
  - resource: q
    count: 100
    clusterMode: true
cluster:
  redis: redis://127.0.0.1:6379/0
`
		}
		return s
	}
	g := startGateway(t, rules(":18080", "info", false))
	if metric(t, g, `sluice_circuit_state{resource="q"}`) != "0" {
		t.Errorf("no closed breaker state exported after the first load")
	}
	g.writeRules(rules(":18081", "debug", true))
	hdWaitEvents(t, g, "rules loaded", 1) // loaded 2 times
	for _, want := range []string{"log.level changed", "clusterMode rule checked locally"} {
		if len(g.logs.Events(want)) == 0 {
			t.Errorf("no %q warning after the reload:\n%s", want, g.logs)
		}
	}
	// The harness passes -listen, which wins over the file: the file's
	// new listen would not take effect at restart either, so no warning.
	if len(g.logs.Events("listen changed")) != 0 {
		t.Errorf("a listen warning although -listen overrides the file:\n%s", g.logs)
	}
	if resp, _ := get(t, g.URL+"/q"); resp.StatusCode != 200 {
		t.Errorf("after the reload: %d, want 200 (the cluster rule applies locally)", resp.StatusCode)
	}
}

// TestReloadRotatesAdminToken: a token rotated in rules.yaml is in force at
// the reload (the new one works, the old one gets 401), and is never logged;
// with SLUICE_ADMIN_TOKEN set, the environment's token stays in force and
// the file's change is warned of.
func TestReloadRotatesAdminToken(t *testing.T) {
	up := startUpstream(t, nil)
	rules := func(token string) string {
		return "admin: {token: " + token + "}\n" + rulesFor(up.URL, "routes:\n  - path: /r\n    upstream: up\n")
	}
	reload := func(g *gateway, token string) int {
		code, _, _ := admDo(t, "POST", g.AdminURL+"/api/reload", "", "Authorization: Bearer "+token)
		return code
	}
	const oldTok, newTok, envTok = "old-Token-1", "new-Token-2", "env-Token-3"

	t.Run("admin.token", func(t *testing.T) {
		g := startGateway(t, rules(oldTok))
		if code := reload(g, oldTok); code != 202 {
			t.Fatalf("the first token: %d, want 202", code)
		}
		hdWaitEvents(t, g, "rules loaded", 1) // loaded 2 times
		g.writeRules(rules(newTok))
		hdWaitEvents(t, g, "rules loaded", 2) // loaded 3 times
		if code := reload(g, newTok); code != 202 {
			t.Errorf("the rotated token after the reload: %d, want 202", code)
		}
		if code := reload(g, oldTok); code != 401 {
			t.Errorf("the old token after the reload: %d, want 401", code)
		}
		if len(g.logs.Events("admin.token changed: the new token is in force")) != 1 {
			t.Errorf("the rotation was not logged once:\n%s", g.logs)
		}
		if logs := g.logs.String(); strings.Contains(logs, oldTok) || strings.Contains(logs, newTok) {
			t.Errorf("a token is in the log:\n%s", logs)
		}
	})

	t.Run("SLUICE_ADMIN_TOKEN wins", func(t *testing.T) {
		t.Setenv("SLUICE_ADMIN_TOKEN", envTok) // inherited by the gateway process
		g := startGateway(t, rules(oldTok))
		g.writeRules(rules(newTok))
		hdWaitEvents(t, g, "rules loaded", 1) // loaded 2 times
		if code := reload(g, envTok); code != 202 {
			t.Errorf("the environment's token after the reload: %d, want 202", code)
		}
		for _, tok := range []string{oldTok, newTok} {
			if code := reload(g, tok); code != 401 {
				t.Errorf("the file's token %s with SLUICE_ADMIN_TOKEN set: %d, want 401", tok, code)
			}
		}
		if len(g.logs.Events("but SLUICE_ADMIN_TOKEN overrides it")) != 1 {
			t.Errorf("the overridden file change was not warned of:\n%s", g.logs)
		}
		if logs := g.logs.String(); strings.Contains(logs, envTok) || strings.Contains(logs, newTok) {
			t.Errorf("a token is in the log:\n%s", logs)
		}
	})
}

// TestReloadWarnsStartOnlySettings: a reload that changes admin.listen,
// cluster.redis or cluster.namespace (read only at start) warns, naming the
// setting with the value in force and the file's new one, passwords masked;
// the admin listener stays where it was.
func TestReloadWarnsStartOnlySettings(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, nil)
	adminA, adminB := freeAddr(t), freeAddr(t)
	rules := func(adminAddr, redis, ns string) string {
		return "admin: {listen: \"" + adminAddr + "\"}\ncluster: {redis: \"" + redis + "\", namespace: " + ns + "}\n" +
			rulesFor(up.URL, "routes:\n  - path: /r\n    upstream: up\n")
	}
	// -admin "" leaves the admin address to the file.
	g := startGateway(t, rules(adminA, "redis://sluice:pw-One@127.0.0.1:6379/0", "e2e-a"), "-admin", "")
	if g.AdminURL != "http://"+adminA {
		t.Fatalf("admin listens on %s, want the file's %s", g.AdminURL, adminA)
	}
	g.writeRules(rules(adminB, "redis://sluice:pw-Two@127.0.0.2:6380/1", "e2e-b"))
	hdWaitEvents(t, g, "rules loaded", 1) // loaded 2 times
	for _, want := range []struct{ setting, old, new string }{
		{"admin.listen", adminA, adminB},
		{"cluster.redis", "redis://sluice:xxxxx@127.0.0.1:6379/0", "redis://sluice:xxxxx@127.0.0.2:6380/1"},
		{"cluster.namespace", "e2e-a", "e2e-b"},
	} {
		evs := g.logs.Events(want.setting + " changed in the rules file: it takes effect at restart")
		if len(evs) != 1 || evs[0]["level"] != "warn" || evs[0]["setting"] != want.setting ||
			evs[0]["old"] != want.old || evs[0]["new"] != want.new {
			t.Errorf("%s: warnings %v, want one with old %q and new %q", want.setting, evs, want.old, want.new)
		}
	}
	if logs := g.logs.String(); strings.Contains(logs, "pw-One") || strings.Contains(logs, "pw-Two") {
		t.Errorf("a Redis password is in the log:\n%s", logs)
	}
	if code, _, _ := admDo(t, "GET", "http://"+adminA+"/healthz", ""); code != 200 {
		t.Errorf("the admin listener moved at the reload: GET %s/healthz = %d", adminA, code)
	}
	// An unrelated edit does not repeat the warnings.
	g.writeRules(rules(adminB, "redis://sluice:pw-Two@127.0.0.2:6380/1", "e2e-b") + "# touched\n")
	hdWaitEvents(t, g, "rules loaded", 2) // loaded 3 times
	if n := len(g.logs.Events("admin.listen changed")); n != 1 {
		t.Errorf("admin.listen warned %d times after an unrelated edit, want once", n)
	}
}
