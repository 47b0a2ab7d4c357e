package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/internal/logtest"
	"sluice/internal/redistest"
	"sluice/rulesource"
)

// logs is the instance's log, written by its goroutines, read by the test.
type logs = logtest.Buffer

// upstream answers 200 with "up" to every request.
func upstream(t *testing.T) string {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up") }))
	t.Cleanup(up.Close)
	return up.URL
}

// rulesFile writes a rules file (listen on 127.0.0.1:0, the upstream up,
// then body) and returns its path; write replaces its body.
func rulesFile(t *testing.T, up, body string) (path string, write func(body string)) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "rules.yaml")
	write = func(body string) {
		t.Helper()
		data := fmt.Sprintf("listen: \"127.0.0.1:0\"\nupstreams: {app: {targets: [%q]}}\n%s\n", up, body)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(body)
	return path, write
}

// running starts o's instance and serves it until the test ends; it
// returns the instance and the plain listener's address.
func running(t *testing.T, o Options) (*Instance, string) {
	t.Helper()
	inst, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inst.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	plain, _, _ := inst.Addrs()
	return inst, plain
}

// status is GET http://addr+path's status, 0 if the request failed.
func status(t *testing.T, addr, path string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestNewRefusesWhatCannotServe: invalid rules, a taken port and a
// missing file stop the start, before anything is served.
func TestNewRefusesWhatCannotServe(t *testing.T) {
	up := upstream(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	invalid, _ := rulesFile(t, up, "routes: [{path: /a, upstream: nowhere}]")
	valid, _ := rulesFile(t, up, "routes: [{path: /a, upstream: app}]")
	for _, tt := range []struct {
		name string
		o    Options
		want string
	}{
		{"invalid rules", Options{Config: invalid, Admin: "off"}, "invalid rules file"},
		{"a missing file", Options{Config: filepath.Join(t.TempDir(), "none.yaml"), Admin: "off"}, "invalid rules file"},
		{"a taken traffic port", Options{Config: valid, Listen: taken.Addr().String(), Admin: "off"}, "address already in use"},
		{"a taken admin port", Options{Config: valid, Admin: taken.Addr().String()}, "address already in use"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log logs
			tt.o.Log = &log
			inst, err := New(tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, %v; want an error saying %q", inst, err, tt.want)
			}
			// Said once, as a log event (JSON here), which main then
			// does not print again as a plain line.
			if !Logged(err) || !strings.Contains(log.String(), `"level":"error"`) || !strings.Contains(log.String(), "not starting") {
				t.Errorf("New's refusal %v is not one logged event (Logged %v); log:\n%s", err, Logged(err), log.String())
			}
		})
	}
}

// TestServeReloadAndDrain: an instance serves its rules and its admin API
// on 127.0.0.1:0; a
// reload (Reload, as on SIGHUP, or a change to the file) applies a new
// route; an invalid file keeps the rules in force and Reload says why.
func TestServeReloadAndDrain(t *testing.T) {
	up := upstream(t)
	path, write := rulesFile(t, up, "routes: [{path: /a, upstream: app}]")
	var log logs
	inst, addr := running(t, Options{Config: path, Admin: "127.0.0.1:0", Drain: time.Second, Log: &log})
	if got := status(t, addr, "/a"); got != http.StatusOK {
		t.Fatalf("GET /a: %d, want 200", got)
	}
	if _, _, admin := inst.Addrs(); status(t, admin, "/readyz") != http.StatusOK {
		t.Errorf("the admin listener (%q) does not answer /readyz with 200", admin)
	}
	if got := status(t, addr, "/b"); got != http.StatusNotFound {
		t.Fatalf("GET /b before the reload: %d, want 404", got)
	}

	write("routes: [{path: /a, upstream: app}, {path: /b, upstream: app}]")
	if err := inst.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := status(t, addr, "/b"); got != http.StatusOK {
		t.Errorf("GET /b after Reload: %d, want 200", got)
	}

	write("routes: [{path: /a, upstream: app}, {path: /b, upstream: nowhere}]")
	if err := inst.Reload(); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("Reload of an invalid file: %v, want its error", err)
	}
	if got := status(t, addr, "/b"); got != http.StatusOK {
		t.Errorf("GET /b after an invalid file: %d, want 200 (the last good rules)", got)
	}

	// The file watch reloads without being asked.
	write("routes: [{path: /a, upstream: app}, {path: /b, upstream: app}, {path: /c, upstream: app}]")
	redistest.WaitFor(t, 10*time.Second, "the watched file's new route /c served", func() bool {
		return status(t, addr, "/c") == http.StatusOK
	})
	if !strings.Contains(log.String(), `"message":"sluice started"`) {
		t.Errorf("no start line logged:\n%s", log.String())
	}
}

// TestReloadAppliesLiveAndWarnsStartOnly: a reload puts a setting that
// applies live in force (a flow rule; server.sendTimeout, for new
// connections) and warns of one
// read only at start (http2.h2c), which stays as it started.
func TestReloadAppliesLiveAndWarnsStartOnly(t *testing.T) {
	up := upstream(t)
	routes := "routes: [{path: /a, upstream: app, resource: a}]"
	path, write := rulesFile(t, up, routes)
	var log logs
	inst, addr := running(t, Options{Config: path, Admin: "off", Log: &log})

	write(routes + "\nflowRules: [{resource: a, count: 1}]\nhttp2: {h2c: true}\nserver: {sendTimeout: 5s}")
	if err := inst.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	// One request a second passes: of three at once, at least two are refused.
	if got := []int{status(t, addr, "/a"), status(t, addr, "/a"), status(t, addr, "/a")}; got[2] != http.StatusTooManyRequests {
		t.Errorf("GET /a three times under a rule of one a second: %v, want the third 429", got)
	}
	said := map[string]logged{}
	for _, ev := range events(t, bytes.NewBufferString(log.String())) {
		if name, ok := ev["setting"].(string); ok {
			said[name] = ev
		}
	}
	for name, want := range map[string]logged{
		"http2.h2c": {"level": "warn", "setting": "http2.h2c", "old": "false", "new": "true",
			"message": "http2.h2c changed in the rules file: it takes effect at restart"},
		"server.sendTimeout": {"level": "info", "setting": "server.sendTimeout", "old": "30s", "new": "5s",
			"message": "server.sendTimeout changed: it applies to connections and HTTP/2 streams opened from now on"},
	} {
		if fmt.Sprint(said[name]) != fmt.Sprint(want) {
			t.Errorf("logged for %s: %v, want %v", name, said[name], want)
		}
	}
	// h2c stays off: a prior-knowledge HTTP/2 preface is not HTTP/1.1.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	reply, _ := io.ReadAll(io.LimitReader(conn, 64))
	if bytes.HasPrefix(reply, []byte("\x00")) || !bytes.HasPrefix(reply, []byte("HTTP/1.1 ")) {
		t.Errorf("h2c answered after a reload turned it on (start-only): %q", reply)
	}
}

// TestFleetMembership: a gateway with a rulesSource serves the stored
// document merged with its file, writes its heartbeat (its listen address
// and the version in force) while it runs, and leaves the fleet when Run
// returns.
func TestFleetMembership(t *testing.T) {
	srv := redistest.Start(t)
	up := upstream(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	store := rulesource.New(rdb, "lifecycle-fleet")
	ctx := context.Background()
	doc := fmt.Sprintf("upstreams: {app: {targets: [%q]}}\nroutes: [{path: /f, upstream: app}]\n", up)
	if _, err := store.Push(ctx, []byte(doc), 0); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	file := fmt.Sprintf("listen: \"127.0.0.1:0\"\nrulesSource: {redis: %q, key: lifecycle-fleet}\n", srv.URL())
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}

	inst, err := New(Options{Config: path, Admin: "off", Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- inst.Run(rctx) }()
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	defer stop()
	addr, _, _ := inst.Addrs()
	if got := status(t, addr, "/f"); got != http.StatusOK {
		t.Errorf("GET /f (a route of the document): %d, want 200", got)
	}
	fleet := func() []rulesource.Beat {
		beats, err := store.Fleet(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return beats
	}
	redistest.WaitFor(t, 5*time.Second, "the heartbeat written", func() bool { return len(fleet()) == 1 })
	if b := fleet()[0]; b.Listen != addr || b.Version != 1 {
		t.Errorf("heartbeat %+v, want listen %s and version 1", b, addr)
	}

	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if beats := fleet(); len(beats) != 0 {
		t.Errorf("the gateway stopped, yet the fleet lists %+v", beats)
	}
}

// TestAdminTokenIsTrimmed: a token kept in a file often ends in a line
// break (a Kubernetes Secret made --from-file), which no client can send
// and admin's bearer trims from the header: SLUICE_ADMIN_TOKEN and
// admin.token are used without surrounding white space (docs/admin.md),
// and one of white space only counts as unset.
func TestAdminTokenIsTrimmed(t *testing.T) {
	up := upstream(t)
	for _, tt := range []struct {
		name, env, file string
		bearer          string
		want            int
	}{
		{"SLUICE_ADMIN_TOKEN with a line break", "s3cret\n", "", "s3cret", http.StatusAccepted},
		{"admin.token with a line break", "", `"s3cret\n"`, "s3cret", http.StatusAccepted},
		{"SLUICE_ADMIN_TOKEN with spaces, over admin.token", "  s3cret\r\n", "other", "s3cret", http.StatusAccepted},
		{"a wrong token still refused", "s3cret\n", "", "s3cre", http.StatusUnauthorized},
		{"SLUICE_ADMIN_TOKEN of white space only: admin.token", "\n", "other", "other", http.StatusAccepted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := "routes: [{path: /a, upstream: app}]"
			if tt.file != "" {
				body += "\nadmin: {token: " + tt.file + "}"
			}
			path, _ := rulesFile(t, up, body)
			var log logs
			inst, _ := running(t, Options{Config: path, Admin: "127.0.0.1:0", AdminToken: tt.env, Log: &log, Drain: time.Second})
			_, _, admin := inst.Addrs()
			req, _ := http.NewRequest("POST", "http://"+admin+"/api/reload", nil)
			req.Header.Set("Authorization", "Bearer "+tt.bearer)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("POST /api/reload with Bearer %s: %d, want %d", tt.bearer, resp.StatusCode, tt.want)
			}
		})
	}
}
