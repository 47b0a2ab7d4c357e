package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
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
	t.Parallel()
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
	t.Parallel()
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

// TestEdgeTLS12OffersAEADsOnly: the TLS listener of the real binary
// speaks TLS 1.2 with forward-secret AEAD suites only (docs/edge.md): a
// client offering only ECDHE with AES-CBC and HMAC-SHA1 (ECDHE-ECDSA-
// AES128-SHA with an ECDSA certificate, ECDHE-RSA-AES256-SHA with an RSA
// one) gets no handshake, one offering GCM or ChaCha20 gets its answer;
// from Go's client and from openssl s_client.
func TestEdgeTLS12OffersAEADsOnly(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "e2e CA")
	dir := t.TempDir()
	edgePair(t, ca, dir, "ec", "ec.example.com")
	ca.ServerRSA(t, time.Now().Add(30*24*time.Hour), "rsa.example.com").
		Write(t, filepath.Join(dir, "rsa.crt"), filepath.Join(dir, "rsa.key"))
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	up := echoUpstream(t)
	g := startEdge(t, dir, fmt.Sprintf(`
tls:
  listen: "127.0.0.1:0"
  certificates:
    - { certFile: ec.crt, keyFile: ec.key }
    - { certFile: rsa.crt, keyFile: rsa.key }
upstreams:
  up: { targets: [%q] }
routes:
  - path: /*
    upstream: up
`, up.URL))
	cases := []struct {
		name, sni string
		suite     uint16
		ok        bool
	}{
		{"ECDHE-ECDSA-AES128-SHA", "ec.example.com", tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, false},
		{"ECDHE-RSA-AES256-SHA", "rsa.example.com", tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, false},
		{"ECDHE-ECDSA-AES128-GCM-SHA256", "ec.example.com", tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, true},
		{"ECDHE-RSA-AES256-GCM-SHA384", "rsa.example.com", tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, true},
		{"ECDHE-RSA-CHACHA20-POLY1305", "rsa.example.com", tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, true},
	}
	for _, c := range cases {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: c.sni,
			MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{c.suite}}}
		cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		resp, err := cl.Get("https://" + g.TLSAddr + "/x")
		if err == nil {
			resp.Body.Close()
		}
		switch {
		case c.ok && (err != nil || resp.StatusCode != 200 || resp.TLS.CipherSuite != c.suite):
			t.Errorf("Go, TLS 1.2 offering %s only: %v; want 200 over it", c.name, err)
		case !c.ok && err == nil:
			t.Errorf("Go, TLS 1.2 offering %s only: %s over %s; want no handshake",
				c.name, resp.Status, tls.CipherSuiteName(resp.TLS.CipherSuite))
		}
		tr.CloseIdleConnections()
	}

	openssl := needTool(t, "openssl", "openssl")
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		// @SECLEVEL=0: this openssl must not be what refuses the suite.
		cmd := exec.CommandContext(ctx, openssl, "s_client", "-connect", g.TLSAddr, "-servername", c.sni,
			"-tls1_2", "-cipher", c.name+":@SECLEVEL=0", "-CAfile", caFile, "-verify_return_error")
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		cancel()
		agreed := regexp.MustCompile(`Cipher is (\S+)`).FindSubmatch(out)
		got := ""
		if err == nil && agreed != nil {
			got = string(agreed[1])
		}
		switch {
		case c.ok && got != c.name:
			t.Errorf("openssl s_client -tls1_2 -cipher %s: %v, agreed on %q; want %s:\n%s", c.name, err, got, c.name, out)
		case !c.ok && got != "" && got != "(NONE)":
			t.Errorf("openssl s_client -tls1_2 -cipher %s: agreed on %s; want no handshake:\n%s", c.name, got, out)
		}
	}
}
