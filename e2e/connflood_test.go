package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestHardeningConnectionFlood: a client that opens connections and sends
// nothing holds no rule's slot, so only a cap on connections keeps it from
// taking every descriptor the gateway has, and with them the upstream
// connections every other request needs. With no server.maxConnections the
// cap is half the open-file limit less a reserve: with a limit of 512, 192
// connections. Past it a connection is closed at once, counted and logged,
// and the connections within it are served, each with its own upstream
// connection, with no 502.
func TestHardeningConnectionFlood(t *testing.T) {
	const (
		limit    = 512
		autoCap  = (limit - 128) / 2
		flood    = 300
		upstream = 200 * time.Millisecond // every admitted request in flight at once: one upstream connection each
	)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(upstream)
		io.WriteString(w, "ok")
	})
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`upstreams: { up: { targets: [%q] } }
routes: [{ path: /, upstream: up }]
`, up.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	lowered := func(name string, args ...string) *exec.Cmd {
		return exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, limit), name}, args...)...)
	}
	g := startGatewayCmd(t, path, lowered)
	addr := hdAddr(g.URL)

	conns := make([]net.Conn, 0, flood)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range flood {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	poll(t, 10*time.Second, "the connections counted", func() string {
		m, err := scrapeMetrics(g.AdminURL)
		if err != nil {
			return err.Error()
		}
		open, refused := m["sluice_connections_open"], m[`sluice_connections_refused_total{reason="maxConnections"}`]
		if open != autoCap || refused != flood-autoCap {
			return fmt.Sprintf("open %v, refused %v; want %d and %d", open, refused, autoCap, flood-autoCap)
		}
		return ""
	})

	// One request on every connection at once.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{} // 0: no answer (the connection was closed at accept)
	)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			status := 0
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: shop\r\n\r\n"); err == nil {
				if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
					status = resp.StatusCode
					resp.Body.Close()
				}
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if statuses[200] != autoCap || statuses[0] != flood-autoCap || len(statuses) != 2 {
		t.Fatalf("answers by status %v; want %d × 200 (the connections within the cap) and %d × none (those closed at accept)",
			statuses, autoCap, flood-autoCap)
	}
	if ev := g.logs.Find("connection refused", 0); ev == nil || ev["level"] != "warn" || ev["reason"] != "maxConnections" {
		t.Fatalf("no warn event naming the cap for the refused connections: %v", ev)
	}

	for _, c := range conns {
		c.Close()
	}
	poll(t, 10*time.Second, "every connection given back", func() string {
		m, err := scrapeMetrics(g.AdminURL)
		if err != nil {
			return err.Error()
		}
		if open := m["sluice_connections_open"]; open != 0 {
			return fmt.Sprintf("sluice_connections_open %v", open)
		}
		return ""
	})
}
