package lifecycle

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newStopped builds an instance from path without serving it; requests go
// straight to its gateway.
func newStopped(t *testing.T, path string) *Instance {
	t.Helper()
	var log logs
	inst, err := New(Options{Config: path, Admin: "off", Log: &log})
	if err != nil {
		t.Fatalf("New: %v\n%s", err, log.String())
	}
	t.Cleanup(func() { inst.lns.traffic.close(); inst.close() })
	return inst
}

func hit(inst *Instance, path string, hdr ...string) int {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	inst.proxy.ServeHTTP(w, r)
	return w.Code
}

// TestStateKeptAcrossReloads: a rule whose definition did not change
// keeps its window across many reloads, with rules inserted before it and
// with only a comment or an unrelated route changing.
func TestStateKeptAcrossReloads(t *testing.T) {
	up := upstream(t)
	base := "routes: [{path: /a, upstream: app, resource: a}, {path: \"/p/{id}\", upstream: app, resource: p}]\n"
	flow := "  - {resource: a, count: 3, statIntervalMs: 60000}\n"
	param := "paramRules:\n  - {resource: p, param: path:id, count: 2, durationSec: 60}\n"
	path, write := rulesFile(t, up, base+"flowRules:\n"+flow+param)
	inst := newStopped(t, path)
	for i := 0; i < 3; i++ {
		if c := hit(inst, "/a"); c != 200 {
			t.Fatalf("request %d: %d", i, c)
		}
	}
	for i := 0; i < 2; i++ {
		if c := hit(inst, "/p/1"); c != 200 {
			t.Fatalf("param request %d: %d", i, c)
		}
	}
	bodies := []string{
		base + "# a comment\nflowRules:\n" + flow + param,
		base + "flowRules:\n  - {resource: p, count: 100}\n" + flow + "paramRules:\n  - {resource: p, param: path:id, count: 50}\n  - {resource: p, param: path:id, count: 2, durationSec: 60}\n",
		"routes: [{path: /zz, upstream: app}, {path: /a, upstream: app, resource: a}, {path: \"/p/{id}\", upstream: app, resource: p}]\nflowRules:\n" + flow + param,
		base + "flowRules:\n" + flow + param,
	}
	for i := 0; i < 20; i++ {
		write(bodies[i%len(bodies)])
		if err := inst.Reload(); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		if c := hit(inst, "/a"); c != 429 {
			t.Fatalf("after reload %d (%q): /a got %d, want 429", i, bodies[i%len(bodies)], c)
		}
		if c := hit(inst, "/p/1"); c != 429 {
			t.Fatalf("after reload %d: /p/1 got %d, want 429", i, c)
		}
	}
}

// TestConcurrencyAndBreakerKeptAcrossReload: a request in flight
// across a reload still counts against an unchanged concurrency rule and
// releases its slot into it; an open breaker stays open.
func TestConcurrencyAndBreakerKeptAcrossReload(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			entered <- struct{}{}
			<-release
		case "/bad":
			w.WriteHeader(500)
		}
	}))
	t.Cleanup(up.Close)
	routes := "routes: [{path: /slow, upstream: app, resource: slow}, {path: /bad, upstream: app, resource: bad}, {path: /x, upstream: app}]\n"
	rules := "flowRules:\n  - {resource: slow, grade: concurrency, count: 1}\ndegradeRules:\n  - {resource: bad, strategy: errorCount, threshold: 2, minRequestAmount: 1, statIntervalMs: 60000, retryTimeoutMs: 60000}\n"
	path, write := rulesFile(t, up.URL, routes+rules)
	inst := newStopped(t, path)
	done := make(chan int, 1)
	go func() { done <- hit(inst, "/slow") }()
	<-entered
	for i := 0; i < 3; i++ {
		hit(inst, "/bad")
	}
	if c := hit(inst, "/bad"); c != 429 {
		t.Fatalf("breaker not open before the reload: %d", c)
	}
	for i := 0; i < 5; i++ {
		write("routes: [{path: /y, upstream: app}, {path: /slow, upstream: app, resource: slow}, {path: /bad, upstream: app, resource: bad}, {path: /x, upstream: app}]\n" +
			"flowRules:\n  - {resource: bad, count: 1000}\n  - {resource: slow, grade: concurrency, count: 1}\ndegradeRules:\n  - {resource: slow, strategy: errorCount, threshold: 100, minRequestAmount: 1, statIntervalMs: 60000, retryTimeoutMs: 60000}\n  - {resource: bad, strategy: errorCount, threshold: 2, minRequestAmount: 1, statIntervalMs: 60000, retryTimeoutMs: 60000}\n# " + string(rune('a'+i)))
		if err := inst.Reload(); err != nil {
			t.Fatal(err)
		}
		if c := hit(inst, "/slow"); c != 429 {
			t.Fatalf("reload %d: a second request to the concurrency-1 resource got %d", i, c)
		}
		if c := hit(inst, "/bad"); c != 429 {
			t.Fatalf("reload %d: breaker closed by the reload: %d", i, c)
		}
	}
	close(release)
	if c := <-done; c != 200 {
		t.Fatalf("in-flight request: %d", c)
	}
	go func() { done <- hit(inst, "/slow") }()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the slot of the request in flight across the reloads was not released")
	}
	<-done
}

// TestDrain: on shutdown a request in flight finishes with its
// answer, a new connection is refused, and Run returns; a request that
// outlasts the drain timeout does not hold Run past it.
func TestDrain(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = w.Write([]byte("done"))
	}))
	t.Cleanup(up.Close)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	path, _ := rulesFile(t, up.URL, "routes: [{path: /slow, upstream: app, resource: slow}]\nflowRules: [{resource: slow, count: 2, controlBehavior: throttle, maxQueueingTimeMs: 800}]")
	var log logs
	inst, err := New(Options{Config: path, Admin: "off", Drain: 2 * time.Second, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inst.Run(ctx) }()
	addr, _, _ := inst.Addrs()
	res := make(chan int, 2)
	go func() { res <- status(t, addr, "/slow") }()
	<-entered
	go func() { res <- status(t, addr, "/slow") }() // queued by the throttle
	time.Sleep(100 * time.Millisecond)
	cancel()
	time.Sleep(100 * time.Millisecond)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("a new connection was accepted during the drain")
	}
	// The queued one enters the upstream once its slot comes.
	select {
	case <-entered:
	case <-time.After(3 * time.Second):
		t.Fatal("the throttle-queued request never reached the upstream during the drain")
	}
	free()
	for i := 0; i < 2; i++ {
		if c := <-res; c != 200 {
			t.Errorf("request in flight at shutdown: %d, want 200", c)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

// TestEditBetweenNewAndRunIsApplied: the file changes after New read
// it and before Run watches it (a start slowed by an unreachable rules
// source takes seconds): the change applies, it is not lost until the
// next edit.
func TestEditBetweenNewAndRunIsApplied(t *testing.T) {
	up := upstream(t)
	path, write := rulesFile(t, up, "routes: [{path: /a, upstream: app}]")
	var log logs
	inst, err := New(Options{Config: path, Admin: "off", Drain: time.Second, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	write("routes: [{path: /a, upstream: app}, {path: /b, upstream: app}]")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inst.Run(ctx) }()
	defer func() { cancel(); <-done }()
	addr, _, _ := inst.Addrs()
	deadline := time.Now().Add(5 * time.Second)
	for status(t, addr, "/b") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("an edit made between New and Run was never applied")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNoRequestFailsDuringReloads: requests served while the rules
// reload over and over (rules inserted before and removed, the watched
// file and SIGHUP-style reloads at once) are all answered 200 or 429, and
// no concurrency slot leaks.
func TestNoRequestFailsDuringReloads(t *testing.T) {
	up := upstream(t)
	routes := "routes: [{path: /c, upstream: app, resource: c}, {path: /q, upstream: app, resource: q}]\n"
	keep := "  - {resource: c, grade: concurrency, count: 2}\n  - {resource: q, count: 100000}\n"
	path, write := rulesFile(t, up, routes+"flowRules:\n"+keep)
	inst := newStopped(t, path)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	bad := make(chan int, 100)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, p := range []string{"/c", "/q"} {
					if c := hit(inst, p); c != 200 && c != 429 {
						select {
						case bad <- c:
						default:
						}
					}
				}
			}
		}()
	}
	var rw sync.WaitGroup
	for g := 0; g < 2; g++ {
		rw.Add(1)
		go func() {
			defer rw.Done()
			for i := 0; i < 30; i++ {
				_ = inst.Reload()
			}
		}()
	}
	for i := 0; i < 30; i++ {
		extra := ""
		if i%2 == 0 {
			extra = "  - {resource: q, count: 50000}\n"
		}
		write(routes + "flowRules:\n" + extra + keep)
		if err := inst.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	rw.Wait()
	close(stop)
	wg.Wait()
	close(bad)
	for c := range bad {
		t.Errorf("a request during the reloads got %d", c)
	}
	for i := 0; i < 3; i++ {
		if c := hit(inst, "/c"); c != 200 {
			t.Fatalf("after the reloads, a lone request to the concurrency-2 resource got %d: slots leaked", c)
		}
	}
}

// TestNewRefusesAFIFOPromptly: a rules file that is a FIFO with no
// writer is refused at once (not a regular file), not waited on.
func TestNewRefusesAFIFOPromptly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := New(Options{Config: path, Admin: "off", Log: io.Discard})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("New took a FIFO as its rules file")
		}
	case <-time.After(5 * time.Second):
		// Unblock it: a writer opens the FIFO and goes.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("New blocked on a FIFO rules file")
	}
}

// TestReadyzFailsWhileDraining: once shutdown begins, /readyz is 503 while
// the admin API stays up for the drain, so a load balancer or Kubernetes
// stops sending traffic to a gateway whose listeners are closed; /healthz
// stays 200 (alive). It answered 200 ready all through the drain. A
// reload asked for meanwhile is 503: the reloader has stopped.
func TestReadyzFailsWhileDraining(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(up.Close)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	path, _ := rulesFile(t, up.URL, "routes: [{path: /slow, upstream: app}]")
	inst, err := New(Options{Config: path, Admin: "127.0.0.1:0", Drain: 5 * time.Second, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inst.Run(ctx) }()
	addr, _, adminAddr := inst.Addrs()
	if c := status(t, adminAddr, "/readyz"); c != 200 {
		t.Fatalf("/readyz before shutdown: %d, want 200", c)
	}
	go status(t, addr, "/slow")
	<-entered
	cancel() // the drain waits for /slow
	deadline := time.Now().Add(5 * time.Second)
	for status(t, adminAddr, "/readyz") != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatal("/readyz never said 503 during the drain")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c := status(t, adminAddr, "/healthz"); c != 200 {
		t.Errorf("/healthz during the drain: %d, want 200", c)
	}
	// The reloader has stopped: a reload asked for now is refused, not
	// promised with a 202, and /api/rules says the gateway is draining.
	resp, err := http.Post("http://"+adminAddr+"/api/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("POST /api/reload during the drain: %d, want 503", resp.StatusCode)
	}
	resp, err = http.Get("http://" + adminAddr + "/api/rules?config=false")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct{ Ready, Draining bool }
	err = json.NewDecoder(resp.Body).Decode(&rules)
	resp.Body.Close()
	if err != nil || !rules.Ready || !rules.Draining {
		t.Errorf("/api/rules during the drain: %+v (%v), want ready and draining", rules, err)
	}
	free()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
