package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Helpers of the hardening tests (bad input, faults, soak, shutdown). Names
// start with hd so they cannot clash with other files' helpers.

// hdAddr is the host:port of a gateway URL.
func hdAddr(url string) string { return strings.TrimPrefix(url, "http://") }

// hdRaw sends raw bytes on a new connection and reads one response (nil and
// the error if the connection ended without one). The bytes are written
// while the response is read: a server may answer (431) and hang up before
// taking all of a huge request, and that answer must still be seen.
func hdRaw(t *testing.T, addr, request string) (*http.Response, string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(c, request) // an error shows as a missing response
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// hdEcho is what the echo upstream saw of a request.
type hdEcho struct {
	Method     string              `json:"method"`
	RequestURI string              `json:"requestURI"`
	Path       string              `json:"path"`
	Host       string              `json:"host"`
	Proto      string              `json:"proto"`
	Header     map[string][]string `json:"header"`
	Params     int                 `json:"params"`
	BodyBytes  int64               `json:"bodyBytes"`
}

// hdEchoHandler answers with what it saw, as JSON.
func hdEchoHandler(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	params := 0
	if r.URL.RawQuery != "" {
		params = strings.Count(r.URL.RawQuery, "&") + 1
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(hdEcho{Method: r.Method, RequestURI: r.RequestURI, Path: r.URL.Path, Host: r.Host,
		Proto: r.Proto, Header: r.Header, Params: params, BodyBytes: n})
}

func hdDecodeEcho(t *testing.T, body string) hdEcho {
	t.Helper()
	var e hdEcho
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("upstream echo %q: %v", body, err)
	}
	return e
}

// hdRawUpstream is a TCP listener that hands every connection to serve:
// an upstream that speaks bad HTTP, or none.
func hdRawUpstream(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveConns(t, ln, serve)
	return "http://" + ln.Addr().String()
}

// serveConns hands every connection ln accepts to serve, in a goroutine of
// its own, until the test ends.
func serveConns(t *testing.T, ln net.Listener, serve func(net.Conn)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
}

// hdProcStatus reads a field of /proc/<pid>/status in kB (VmRSS, VmHWM).
func hdProcStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the gateway's /proc status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// hdConcurrency is the resource's concurrency as /api/resources shows it.
func hdConcurrency(t *testing.T, g *gateway, resource string) int64 {
	t.Helper()
	var rs admResources
	admJSON(t, g.AdminURL+"/api/resources", &rs)
	r, _ := rs.get(resource)
	return r.Concurrency
}

// hdWaitConcurrencyZero polls until the resource has nothing in flight.
func hdWaitConcurrencyZero(t *testing.T, g *gateway, resource string) {
	t.Helper()
	poll(t, 5*time.Second, resource+" concurrency back to 0", func() bool {
		return hdConcurrency(t, g, resource) == 0
	})
}

// hdHealthy fails unless the gateway still answers its admin probe and is
// still running.
func hdHealthy(t *testing.T, g *gateway) {
	t.Helper()
	select {
	case <-g.done:
		t.Fatalf("the gateway exited: %v", g.exitErr)
	default:
	}
	resp, err := http.Get(g.AdminURL + "/healthz")
	if err != nil {
		t.Fatalf("healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
}

// hdErrors is sluice_requests_total{resource,result="error"}.
func hdErrors(t *testing.T, g *gateway, resource string) float64 {
	t.Helper()
	return metrics(t, g)[fmt.Sprintf(`sluice_requests_total{resource=%q,result="error"}`, resource)]
}
