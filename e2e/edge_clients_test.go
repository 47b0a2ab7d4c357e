package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sluice/internal/testcert"
)

// startClientsEdge is a gateway with a TLS listener, h2c on the plain one,
// and one limited resource per client case.
func startClientsEdge(t *testing.T, resources ...string) (*edgeGateway, string) {
	t.Helper()
	ca := testcert.NewCA(t, "e2e CA")
	dir := t.TempDir()
	edgePair(t, ca, dir, "shop", "shop.example.com")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	up := echoUpstream(t)
	rules := fmt.Sprintf(`
tls:
  listen: "127.0.0.1:0"
  certificates: [{ certFile: shop.crt, keyFile: shop.key }]
http2:
  h2c: true
upstreams:
  up: { targets: [%q] }
routes:
`, up.URL)
	for _, r := range resources {
		rules += fmt.Sprintf("  - { path: /%s, upstream: up, resource: %s }\n", r, r)
	}
	rules += "flowRules:\n"
	for _, r := range resources {
		rules += fmt.Sprintf("  - { resource: %s, count: 40, statIntervalMs: 60000 }\n", r)
	}
	return startEdge(t, dir, rules), caFile
}

// runClient runs a client command bounded in time and returns its output.
func runClient(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestEdgeCurl: Debian's curl over h2 by ALPN (--http2 on https), h2c
// with prior knowledge, and --http2 on http:// (an h2c upgrade, answered
// over HTTP/1.1); each answer carries the RateLimit headers, and the
// upstream is told X-Forwarded-Proto https only over TLS.
func TestEdgeCurl(t *testing.T) {
	curl := needTool(t, "curl", "curl")
	g, caFile := startClientsEdge(t, "tls", "h2c", "upgrade")
	_, tlsPort, _ := net.SplitHostPort(g.TLSAddr)
	tests := []struct {
		name    string
		args    []string
		version string
		xfp     string
	}{
		{"--http2 over TLS (ALPN)", []string{"--http2", "--cacert", caFile, "--resolve", "shop.example.com:" + tlsPort + ":127.0.0.1",
			"https://shop.example.com:" + tlsPort + "/tls"}, "2", "https"},
		{"--http2-prior-knowledge (h2c)", []string{"--http2-prior-knowledge", g.URL + "/h2c"}, "2", "http"},
		{"--http2 on http:// (an h2c upgrade)", []string{"--http2", g.URL + "/upgrade"}, "1.1", "http"},
	}
	for _, tt := range tests {
		args := append([]string{"-sS", "--max-time", "10", "-D", "-", "-w", "\nversion=%{http_version} status=%{http_code}"}, tt.args...)
		out := runClient(t, curl, args...)
		if want := fmt.Sprintf("version=%s status=200", tt.version); !strings.Contains(out, want) {
			t.Errorf("%s: want %s in:\n%s", tt.name, want, out)
		}
		if !regexp.MustCompile(`(?im)^ratelimit: "[a-z0-9]+";r=39;t=\d+`).MatchString(out) {
			t.Errorf("%s: no RateLimit header with r=39 in:\n%s", tt.name, out)
		}
		if !strings.Contains(out, fmt.Sprintf(`"XFP":%q`, tt.xfp)) {
			t.Errorf("%s: the upstream was not told X-Forwarded-Proto %s:\n%s", tt.name, tt.xfp, out)
		}
	}
}

var h2loadStatus = regexp.MustCompile(`status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)

// TestEdgeH2load: nghttp2's h2load sends 100 requests as 10 concurrent
// streams on one connection, over h2 (TLS) and h2c; the rule of count 40
// passes exactly 40 of each.
func TestEdgeH2load(t *testing.T) {
	h2load := needTool(t, "h2load", "nghttp2-client")
	g, _ := startClientsEdge(t, "tls", "h2c")
	for _, tt := range []struct{ name, url, proto string }{
		{"h2 over TLS", "https://" + g.TLSAddr + "/tls", "h2"},
		{"h2c", g.URL + "/h2c", "h2c"},
	} {
		out := runClient(t, h2load, "-n", "100", "-c", "1", "-m", "10", "-T", "10", tt.url)
		m := h2loadStatus.FindStringSubmatch(out)
		if m == nil || m[1] != "40" || m[3] != "60" || m[2] != "0" || m[4] != "0" {
			t.Errorf("%s: want 40 2xx and 60 4xx in:\n%s", tt.name, out)
		}
		if !strings.Contains(out, "Application protocol: "+tt.proto) {
			t.Errorf("%s: not spoken in %s:\n%s", tt.name, tt.proto, out)
		}
	}
}
