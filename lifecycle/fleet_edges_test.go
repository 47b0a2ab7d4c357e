package lifecycle

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"sluice/config"
	"sluice/internal/redistest"
	"sluice/rulesource"
)

// TestCacheFileMayNotBeRulesFile: rulesSource.cacheFile is written over
// with every good document; naming the rules file itself once erased the
// gateway's listen, admin and rulesSource at its first version, and it
// could not start again. It is refused, naming the field.
func TestCacheFileMayNotBeRulesFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	file := "listen: \"127.0.0.1:0\"\nrulesSource: {redis: \"redis://127.0.0.1:1/0\", key: k, cacheFile: ./gateway.yaml}\n"
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), "gateway.yaml:2: rulesSource.cacheFile: must not be the rules file itself") {
		t.Fatalf("validate: %v, want the cacheFile refused", err)
	}
	if _, err := New(Options{Config: path, Admin: "off", Log: io.Discard}); err == nil {
		t.Fatal("the gateway started with a cacheFile naming its rules file")
	}
	if got, _ := os.ReadFile(path); string(got) != file {
		t.Fatalf("the rules file was changed:\n%s", got)
	}
}

// TestHeartbeatCountsRequestOnce: the heartbeat's passQps (GET /api/fleet
// and the fleet's totals) counts a request once. It summed every resource,
// and a request is counted on its route's resource and again on each API
// group it matches, so ten requests showed as twenty.
func TestHeartbeatCountsRequestOnce(t *testing.T) {
	up := upstream(t)
	path, _ := rulesFile(t, up, "routes: [{path: /f, upstream: app, resource: f}]\napiGroups: [{name: g, match: [{prefix: /f}]}]\n")
	inst, addr := running(t, Options{Config: path, Admin: "off", Log: io.Discard})
	for range 10 {
		if got := status(t, addr, "/f"); got != 200 {
			t.Fatalf("GET /f: %d", got)
		}
	}
	if pass, _ := inst.rates(); pass < 9.5 || pass > 10.5 {
		t.Errorf("10 requests passed within the last second, heartbeat passQps = %v, want 10", pass)
	}
}

// TestDataErrorClearedWhenKeyRestored: the key briefly holds no document
// (its version field not a number, as a bad restore leaves it), then the
// version in force again. The error is reported while it lasts; once the
// key is good a reload of the gateway's own file succeeds. It used to fail
// with "the rules in force stay" until a new version was pushed, because
// the watcher delivered nothing for the version it already knew.
func TestDataErrorClearedWhenKeyRestored(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	up := upstream(t)
	ctx := context.Background()
	doc := fmt.Sprintf("upstreams: {app: {targets: [%q]}}\nroutes: [{path: /f, upstream: app}]\n", up)
	if _, err := rulesource.New(rdb, "edges").Push(ctx, []byte(doc), 0); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	file := fmt.Sprintf("listen: \"127.0.0.1:0\"\nrulesSource: {redis: %q, key: edges}\n", srv.URL())
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	inst, _ := running(t, Options{Config: path, Admin: "off", Log: io.Discard})
	rdb.HSet(ctx, "edges", "version", "abc")
	redistest.WaitFor(t, 5*time.Second, "the bad version field reported", func() bool {
		return inst.reloader.state().LastError != ""
	})
	rdb.HSet(ctx, "edges", "version", "1") // the version in force, valid
	redistest.WaitFor(t, 5*time.Second, "a reload succeeding once the key is good", func() bool {
		return inst.Reload() == nil
	})
}

// TestBackWithNoDocumentKeepsTheCacheLabel: a gateway serving its cache
// sees Redis come back with a key that holds no document. The watch
// delivers that first (one failed reload, the rules in force stay); being
// up then must neither call the cache's document the source's nor reload
// again to fail the same way. With the key holding the cached version,
// being up relabels it and reloads once.
func TestBackWithNoDocumentKeepsTheCacheLabel(t *testing.T) {
	cached := rulesource.Doc{Version: 1, Text: []byte("routes: []\n")}
	for _, tc := range []struct {
		name    string
		deliver func(f *fleet, reload func())
		reloads int
		label   string
	}{
		{"no document", func(f *fleet, reload func()) { f.onDoc(rulesource.Doc{}, nil, reload) }, 1, "cache"},
		{"not a document", func(f *fleet, reload func()) {
			f.onDoc(rulesource.Doc{}, &rulesource.DataError{Msg: "wrong type"}, reload)
		}, 1, "cache"},
		{"the cached version", func(*fleet, func()) {}, 1, "redis://x/0/k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fleet{name: "redis://x/0/k", fromCache: true, log: zerolog.Nop()}
			f.next = document{doc: cached, name: "cache", text: cached.Text}
			reloads := 0
			reload := func() { reloads++ }
			tc.deliver(f, reload)
			f.onState(true, nil, reload)
			if reloads != tc.reloads || f.next.name != tc.label {
				t.Errorf("reloads %d, next named %q; want %d, %q", reloads, f.next.name, tc.reloads, tc.label)
			}
		})
	}
}
