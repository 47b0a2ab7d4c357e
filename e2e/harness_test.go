package e2e

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice/internal/logtest"
	"sluice/internal/skipped"
)

// binary is the sluice binary, loadgenBinary the paced sender and
// upstreamdBinary an upstream a test can kill, built once by TestMain from
// the checkout.
var binary, loadgenBinary, upstreamdBinary string

// A test that measures no time (no load, no rate, no latency, no window
// shorter than 10 s, no deadline its work must meet) starts with
// t.Parallel(), and must not use t.Setenv or anything another test shares.
// go test runs a package's parallel tests only after all of its other
// tests, and never beside them, so every test that measures time still
// runs alone; the parallel ones mostly wait on processes, and overlap those
// waits.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sluice")
	loadgenBinary = filepath.Join(dir, "loadgen")
	upstreamdBinary = filepath.Join(dir, "upstreamd")
	// Built without -race even when the tests run with it: the gateway's
	// speed, and the sender's pace, are part of what e2e tests measure.
	// One go build for the three, so that they compile and link in
	// parallel; with -o a directory, each is named after its package.
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), ".", "./e2e/loadgen", "./e2e/upstreamd")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the sluice, loadgen and upstreamd binaries:", err)
		os.Exit(1)
	}
	code := skipped.Main(m).Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// gateway is a running sluice process on loopback ports.
type gateway struct {
	t        *testing.T
	cmd      *exec.Cmd
	URL      string // traffic listener, http://127.0.0.1:port
	AdminURL string
	Rules    string // path of the rules file
	logs     *logtest.Buffer
	done     chan struct{}
	exitErr  error
}

// startGateway writes rules to a temp dir and starts sluice on free loopback
// ports; it returns once /readyz answers 200.
func startGateway(t *testing.T, rules string, args ...string) *gateway {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	return startGatewayFile(t, path, args...)
}

func startGatewayFile(t *testing.T, path string, args ...string) *gateway {
	t.Helper()
	return startGatewayCmd(t, path, exec.Command, args...)
}

// startGatewayCmd starts sluice as startGatewayFile does, with the command
// command makes of the binary and its arguments (a shell that lowers a
// limit, then execs it: the PID stays the gateway's).
func startGatewayCmd(t *testing.T, path string, command func(name string, args ...string) *exec.Cmd, args ...string) *gateway {
	t.Helper()
	g := &gateway{t: t, Rules: path, logs: &logtest.Buffer{}, done: make(chan struct{})}
	all := append([]string{"-config", path, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-log-format", "json"}, args...)
	g.cmd = command(binary, all...)
	g.cmd.Stderr = g.logs
	g.cmd.Stdout = g.logs
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.exitErr = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(g.stop)

	started := g.waitLog("sluice started", 15*time.Second)
	g.URL = "http://" + started["listen"].(string)
	admin := g.waitLog("admin listening", 5*time.Second)
	g.AdminURL = "http://" + admin["admin"].(string)
	poll(t, 10*time.Second, "sluice ready", func() string {
		resp, err := http.Get(g.AdminURL + "/readyz")
		if err != nil {
			return fmt.Sprintf("%v\nlogs:\n%s", err, g.logs)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Sprintf("/readyz %d\nlogs:\n%s", resp.StatusCode, g.logs)
		}
		return ""
	})
	return g
}

// stop sends SIGTERM and waits; it kills only the process it started.
func (g *gateway) stop() {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(20 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
	if g.t.Failed() {
		g.t.Logf("sluice logs:\n%s", g.logs)
	}
}

// waitLog waits for a JSON log event whose message contains msg and returns it.
func (g *gateway) waitLog(msg string, timeout time.Duration) map[string]any {
	g.t.Helper()
	var ev map[string]any
	poll(g.t, timeout, fmt.Sprintf("log %q", msg), func() bool {
		select {
		case <-g.done:
			g.t.Fatalf("sluice exited (%v) before logging %q:\n%s", g.exitErr, msg, g.logs)
		default:
		}
		ev = g.logs.Find(msg, 0)
		return ev != nil
	})
	return ev
}

// poll is the e2e tests' one wait for a condition: it checks every 10 ms
// until the condition holds, and fails t after within, saying what was
// awaited. check is a func() bool, or a func() string that returns "" when
// the condition holds and otherwise what it saw (the failure shows the last).
func poll[C func() bool | func() string](t testing.TB, within time.Duration, what string, check C) {
	t.Helper()
	var holds func() string
	switch c := any(check).(type) {
	case func() bool:
		holds = func() string {
			if c() {
				return ""
			}
			return "not yet"
		}
	case func() string:
		holds = c
	}
	deadline := time.Now().Add(within)
	for {
		msg := holds()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, within, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scrapeMetrics is the e2e tests' one reader of /metrics: series
// ("name{labels}", as exported) -> value. It does not fail the test, so
// goroutines other than the test's may use it.
func scrapeMetrics(adminURL string) (map[string]float64, error) {
	resp, err := http.Get(adminURL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET /metrics: %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("/metrics line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// metrics is scrapeMetrics for the test's goroutine: an error fails t.
func metrics(t testing.TB, g *gateway) map[string]float64 {
	t.Helper()
	m, err := scrapeMetrics(g.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// metric is one series' value, written as Go's shortest form ("20",
// "+Inf", "1.7e+09"), or "" when the series is absent.
func metric(t testing.TB, g *gateway, series string) string {
	t.Helper()
	v, ok := metrics(t, g)[series]
	if !ok {
		return ""
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// writeRules replaces the rules file the way editors do: a temp file renamed over it.
func (g *gateway) writeRules(rules string) {
	g.t.Helper()
	tmp := g.Rules + ".tmp"
	if err := os.WriteFile(tmp, []byte(rules), 0o644); err != nil {
		g.t.Fatal(err)
	}
	if err := os.Rename(tmp, g.Rules); err != nil {
		g.t.Fatal(err)
	}
}

// upstream is an in-test HTTP server on loopback with adjustable behaviour.
type upstream struct {
	*http.Server
	URL      string
	mu       sync.Mutex
	handler  http.HandlerFunc
	inFlight int64
	maxSeen  int64
	requests int64
}

func startUpstream(t *testing.T, h http.HandlerFunc) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{URL: "http://" + ln.Addr().String(), handler: h}
	u.Server = &http.Server{Handler: http.HandlerFunc(u.serve), ReadHeaderTimeout: 5 * time.Second}
	go u.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = u.Shutdown(ctx)
		u.Close()
	})
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.inFlight++
	u.requests++
	u.maxSeen = max(u.maxSeen, u.inFlight)
	h := u.handler
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.inFlight--
		u.mu.Unlock()
	}()
	if h == nil {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello from upstream "+r.URL.Path)
		return
	}
	h(w, r)
}

func (u *upstream) set(h http.HandlerFunc) {
	u.mu.Lock()
	u.handler = h
	u.mu.Unlock()
}

// stats returns requests served and the most seen in flight at once.
func (u *upstream) stats() (requests, maxInFlight int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.requests, u.maxSeen
}

func (u *upstream) resetStats() {
	u.mu.Lock()
	u.requests, u.maxSeen = 0, u.inFlight
	u.mu.Unlock()
}

// freeAddr returns a loopback address nobody listens on (for 502 tests).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// get does one GET with headers given as "Name: value" pairs.
func get(t *testing.T, url string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// wsAccept is the Sec-WebSocket-Accept a WebSocket server answers a
// client's key with (RFC 6455 4.2.2); the gateway answers 502 to a 101
// without it.
func wsAccept(key string) string {
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(sum[:])
}
