package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/internal/testcert"
)

// TestEdgeTLSListener: certificates by SNI (exact, wildcard, the first
// one), HTTP/2 by ALPN with Go's client and HTTP/1.1 beside it, the
// upstream told X-Forwarded-Proto https over plain HTTP/1.1, the expiry
// metric, renewals by rename and by certbot's symlink swap served without
// a restart, and a broken renewal that keeps the old certificate and is
// reported.
func TestEdgeTLSListener(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "e2e CA")
	dir := t.TempDir()
	first := edgePair(t, ca, dir, "default", "default.test")
	wild := edgePair(t, ca, dir, "wild", "*.example.com")
	// shop is laid out as certbot does: live/ links into archive/.
	shop := ca.Server(t, time.Now().Add(60*24*time.Hour), "shop.example.com")
	certbotInstall(t, dir, shop, 1)
	up := echoUpstream(t)
	g := startEdge(t, dir, fmt.Sprintf(`
tls:
  listen: "127.0.0.1:0"
  certificates:
    - { certFile: default.crt, keyFile: default.key }
    - { certFile: live/shop/fullchain.pem, keyFile: live/shop/privkey.pem }
    - { certFile: wild.crt, keyFile: wild.key }
upstreams:
  up: { targets: [%q] }
routes:
  - path: /*
    upstream: up
`, up.URL))
	tlsURL := "https://" + g.TLSAddr

	served := func(sni string) (*x509Serial, error) {
		c := newClient("h2", ca.Pool(), sni)
		resp, body, err := c.do(t, "GET", tlsURL+"/who", "")
		if err != nil {
			return nil, err
		}
		var e echoed
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			return nil, fmt.Errorf("body %q: %v", body, err)
		}
		if resp.Proto != "HTTP/2.0" || e.XFP != "https" || e.Proto != "HTTP/1.1" {
			return nil, fmt.Errorf("client spoke %s; upstream saw %s with X-Forwarded-Proto %q; want HTTP/2.0, HTTP/1.1, https",
				resp.Proto, e.Proto, e.XFP)
		}
		return &x509Serial{resp.TLS.PeerCertificates[0].SerialNumber.String()}, nil
	}
	for _, tt := range []struct {
		sni  string
		want *testcert.Leaf
	}{
		{"shop.example.com", shop},
		{"api.example.com", wild},
		{"default.test", first},
	} {
		got, err := served(tt.sni)
		if err != nil {
			t.Fatalf("SNI %s: %v", tt.sni, err)
		}
		if got.s != tt.want.Cert.SerialNumber.String() {
			t.Errorf("SNI %s: served serial %s, want %s", tt.sni, got.s, tt.want.Cert.SerialNumber)
		}
	}
	// No name matches: the first certificate (the client checks it
	// against the name it asked for, so this one does not verify).
	raw, err := tls.Dial("tcp", g.TLSAddr, &tls.Config{ServerName: "nothing.test", InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := raw.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(first.Cert.SerialNumber) != 0 {
		t.Errorf("an unknown SNI got serial %v, want the first certificate", got)
	}
	raw.Close()

	// HTTP/1.1 over TLS, and the plain listener, side by side.
	for _, c := range []struct {
		name, url, xfp, proto string
		cl                    *client
	}{
		{"HTTP/1.1 over TLS", tlsURL, "https", "HTTP/1.1", newClient("h1", ca.Pool(), "shop.example.com")},
		{"plain HTTP/1.1", g.URL, "http", "HTTP/1.1", newClient("h1", nil, "")},
	} {
		resp, body, err := c.cl.do(t, "GET", c.url+"/x", "")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var e echoed
		json.Unmarshal([]byte(body), &e)
		if resp.StatusCode != 200 || resp.Proto != c.proto || e.XFP != c.xfp {
			t.Errorf("%s: %d %s, X-Forwarded-Proto %q; want 200 %s %q", c.name, resp.StatusCode, resp.Proto, e.XFP, c.proto, c.xfp)
		}
	}

	expiry := func(name string) string {
		return metric(t, g.gateway, fmt.Sprintf(`sluice_tls_certificate_expiry_timestamp_seconds{name=%q}`, name))
	}
	for _, l := range []*testcert.Leaf{first, shop, wild} {
		if got, want := expiry(l.Cert.DNSNames[0]), unixString(l.Cert.NotAfter); got != want {
			t.Errorf("expiry of %s: %q, want %q", l.Cert.DNSNames[0], got, want)
		}
	}

	// certbot renews: new archive files, live/ links re-pointed.
	shop2 := ca.Server(t, time.Now().Add(90*24*time.Hour), "shop.example.com")
	certbotInstall(t, dir, shop2, 2)
	poll(t, 10*time.Second, "the renewed shop certificate is served", func() string {
		got, err := served("shop.example.com")
		if err != nil || got.s != shop2.Cert.SerialNumber.String() {
			return fmt.Sprintf("serial %v, err %v", got, err)
		}
		return ""
	})
	if got, want := expiry("shop.example.com"), unixString(shop2.Cert.NotAfter); got != want {
		t.Errorf("expiry after the renewal: %q, want %q", got, want)
	}

	// A wildcard renewal written and renamed into place.
	wild2 := ca.Server(t, time.Now().Add(90*24*time.Hour), "*.example.com")
	renameInto(t, dir, "wild", wild2.CertPEM, wild2.KeyPEM)
	poll(t, 10*time.Second, "the renewed wildcard is served", func() string {
		got, err := served("api.example.com")
		if err != nil || got.s != wild2.Cert.SerialNumber.String() {
			return fmt.Sprintf("serial %v, err %v", got, err)
		}
		return ""
	})

	// A broken renewal: the wildcard's key replaced by another one.
	failedBefore := metric(t, g.gateway, `sluice_rules_reloads_total{result="failed"}`)
	renameInto(t, dir, "wild", wild2.CertPEM, first.KeyPEM)
	var tlsErr string
	poll(t, 10*time.Second, "the broken renewal is reported in /api/rules", func() string {
		_, body := get(t, g.AdminURL+"/api/rules")
		var st struct{ TLSError string }
		json.Unmarshal([]byte(body), &st)
		if tlsErr = st.TLSError; !strings.Contains(tlsErr, "certificates[2]") || !strings.Contains(tlsErr, "private key does not match") {
			return fmt.Sprintf("tlsError %q", tlsErr)
		}
		return ""
	})
	if got := metric(t, g.gateway, `sluice_rules_reloads_total{result="failed"}`); got == failedBefore {
		t.Errorf("failed reloads stayed at %s after a broken renewal", got)
	}
	if g.logs.Find("a renewal did not load", 0) == nil {
		t.Error("the broken renewal was not logged")
	}
	if got, err := served("api.example.com"); err != nil || got.s != wild2.Cert.SerialNumber.String() {
		t.Errorf("after a broken renewal: serial %v (err %v), want the last good one", got, err)
	}
	// Mended: the report clears.
	renameInto(t, dir, "wild", wild2.CertPEM, wild2.KeyPEM)
	poll(t, 10*time.Second, "tlsError clears once the pair loads", func() string {
		_, body := get(t, g.AdminURL+"/api/rules")
		if strings.Contains(body, `"tlsError"`) {
			return body
		}
		return ""
	})
}

type x509Serial struct{ s string }

func (x *x509Serial) String() string {
	if x == nil {
		return "<none>"
	}
	return x.s
}

// certbotInstall lays out archive/shop/{fullchain,privkey}N.pem and points
// live/shop/*.pem at them, replacing the links atomically as certbot does.
func certbotInstall(t *testing.T, dir string, l *testcert.Leaf, n int) {
	t.Helper()
	arch, live := filepath.Join(dir, "archive", "shop"), filepath.Join(dir, "live", "shop")
	for _, d := range []string{arch, live} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range map[string][]byte{"fullchain": l.CertPEM, "privkey": l.KeyPEM} {
		f := fmt.Sprintf("%s%d.pem", name, n)
		if err := os.WriteFile(filepath.Join(arch, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(live, name+".pem.tmp")
		if err := os.Symlink(filepath.Join("..", "..", "archive", "shop", f), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(live, name+".pem")); err != nil {
			t.Fatal(err)
		}
	}
}

// renameInto writes base.crt and base.key under temporary names and
// renames them into place, certificate first.
func renameInto(t *testing.T, dir, base string, cert, key []byte) {
	t.Helper()
	for _, f := range []struct {
		name string
		b    []byte
	}{{base + ".crt", cert}, {base + ".key", key}} {
		tmp := filepath.Join(dir, "."+f.name+".tmp")
		if err := os.WriteFile(tmp, f.b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, f.name)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEdgeMutualTLSAndRedirect: with clientCAFile a client without a
// certificate signed by that CA is refused and one with it passes; with
// redirectHttp the plain listener answers every request 308 to https.
func TestEdgeMutualTLSAndRedirect(t *testing.T) {
	t.Parallel()
	ca, clients, strangers := testcert.NewCA(t, "server CA"), testcert.NewCA(t, "client CA"), testcert.NewCA(t, "other CA")
	dir := t.TempDir()
	edgePair(t, ca, dir, "shop", "shop.example.com")
	if err := os.WriteFile(filepath.Join(dir, "clients.pem"), clients.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	up := echoUpstream(t)
	g := startEdge(t, dir, fmt.Sprintf(`
tls:
  listen: "127.0.0.1:0"
  certificates: [{ certFile: shop.crt, keyFile: shop.key }]
  clientCAFile: clients.pem
  minVersion: "1.3"
  redirectHttp: true
upstreams:
  up: { targets: [%q] }
routes:
  - path: /*
    upstream: up
`, up.URL))
	tlsURL := "https://" + g.TLSAddr
	for _, tt := range []struct {
		name  string
		certs []tls.Certificate
		ok    bool
	}{
		{"no client certificate", nil, false},
		{"a certificate of another CA", []tls.Certificate{strangers.Client(t, "mallory").TLS}, false},
		{"a certificate of the client CA", []tls.Certificate{clients.Client(t, "alice").TLS}, true},
	} {
		for _, proto := range []string{"h1", "h2"} {
			resp, _, err := newClient(proto, ca.Pool(), "shop.example.com", tt.certs...).do(t, "GET", tlsURL+"/x", "")
			if tt.ok && (err != nil || resp.StatusCode != 200) {
				t.Errorf("%s over %s: %v %v, want 200", tt.name, proto, resp, err)
			}
			if !tt.ok && err == nil {
				t.Errorf("%s over %s: answered %d, want the handshake refused", tt.name, proto, resp.StatusCode)
			}
		}
	}
	_, port, _ := net.SplitHostPort(g.TLSAddr)
	for _, m := range []string{"GET", "POST"} {
		resp, _, err := newClient("h1", nil, "").do(t, m, g.URL+"/a/b?x=1", "shop.example.com:8080")
		if err != nil {
			t.Fatal(err)
		}
		if want := "https://shop.example.com:" + port + "/a/b?x=1"; resp.StatusCode != 308 || resp.Header.Get("Location") != want {
			t.Errorf("%s on the plain listener: %d %q, want 308 %q", m, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	if n, _ := up.stats(); n != 2 {
		t.Errorf("the upstream served %d requests, want 2 (the mTLS client's over h1 and h2; redirects are not forwarded)", n)
	}
}

// TestEdgeHostRoutes sends requests over TLS with real clients: each row's
// Host reaches its route (docs/edge.md, "Virtual hosts").
func TestEdgeHostRoutes(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "e2e CA")
	dir := t.TempDir()
	edgePair(t, ca, dir, "wild", "*.example.com", "example.com")
	named := func(name string) string {
		return startUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }).URL
	}
	g := startEdge(t, dir, fmt.Sprintf(`
tls:
  listen: "127.0.0.1:0"
  certificates: [{ certFile: wild.crt, keyFile: wild.key }]
upstreams:
  shop:  { targets: [%q] }
  wild:  { targets: [%q] }
  plain: { targets: [%q] }
routes:
  - path: /*
    hosts: [shop.example.com]
    upstream: shop
  - path: /*
    hosts: ["*.example.com"]
    upstream: wild
  - path: /*
    upstream: plain
`, named("shop"), named("wild"), named("plain")))
	for _, tt := range []struct {
		name, host, want string
	}{
		{"precedence: the exact host's route", "shop.example.com", "shop"},
		{"precedence: no host matches: the route without hosts", "example.com", "plain"},
		{"wildcard: one label", "api.example.com", "wild"},
		{"wildcard: several labels", "a.b.example.com", "wild"},
		{"case", "SHOP.Example.Com", "shop"},
		{"port", "shop.example.com:8443", "shop"},
		{"trailing dot", "shop.example.com.", "shop"},
	} {
		for _, proto := range []string{"h1", "h2"} {
			resp, body, err := newClient(proto, ca.Pool(), "x.example.com").do(t, "GET", "https://"+g.TLSAddr+"/p", tt.host)
			if err != nil || resp.StatusCode != 200 || body != tt.want {
				t.Errorf("%s over %s: Host %q reached %q (%v), want %q", tt.name, proto, tt.host, body, err, tt.want)
			}
		}
	}
}

// TestEdgeStrictSNI: with tls.strictSni, a connection made for one host
// that asks for another (domain fronting) is answered 421 over HTTP/1.1
// and h2 and never forwarded; a client whose SNI names no certificate, or
// who sends none, gets no handshake; the hosts the certificates cover are
// served as before.
func TestEdgeStrictSNI(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "e2e CA")
	dir := t.TempDir()
	edgePair(t, ca, dir, "shop", "shop.example.com")
	edgePair(t, ca, dir, "wild", "*.api.test")
	var forwarded atomic.Int32
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		forwarded.Add(1)
		io.WriteString(w, r.Host)
	})
	g := startEdge(t, dir, fmt.Sprintf(`
tls:
  listen: "127.0.0.1:0"
  strictSni: true
  certificates:
    - { certFile: shop.crt, keyFile: shop.key }
    - { certFile: wild.crt, keyFile: wild.key }
log: { access: true }
upstreams:
  app: { targets: [%q] }
routes:
  - path: /*
    upstream: app
`, up.URL))
	url := "https://" + g.TLSAddr + "/p"
	served := 0
	for _, tt := range []struct {
		sni, host string
		status    int
	}{
		{"shop.example.com", "", 200},
		{"shop.example.com", "SHOP.example.com:8443", 200},
		{"a.api.test", "a.api.test", 200},
		{"shop.example.com", "a.api.test", 421},
		{"a.api.test", "b.api.test", 421}, // one wildcard certificate covers both
		{"a.api.test", "shop.example.com", 421},
	} {
		for _, proto := range []string{"h1", "h2"} {
			host := tt.host
			if host == "" {
				host = tt.sni
			}
			resp, body, err := newClient(proto, ca.Pool(), tt.sni).do(t, "GET", url, host)
			if err != nil || resp.StatusCode != tt.status {
				t.Errorf("over %s, SNI %s, Host %s: %v %q (%v), want %d", proto, tt.sni, host, resp, body, err, tt.status)
			}
			if tt.status == 200 {
				served++
			} else if err == nil && !strings.Contains(body, `"misdirected request"`) {
				t.Errorf("over %s, SNI %s, Host %s: body %q, want the gateway's JSON refusal", proto, tt.sni, host, body)
			}
		}
	}
	for _, sni := range []string{"unknown.org", "example.com", "b.a.api.test"} {
		if resp, _, err := newClient("h1", ca.Pool(), sni).do(t, "GET", url, sni); err == nil || !strings.Contains(err.Error(), "unrecognized name") {
			t.Errorf("SNI %s (no certificate for it): %v (%v), want the handshake refused (unrecognized_name)", sni, resp, err)
		}
	}
	// An IP address is never an SNI: Go's client sends none for it.
	noSNI := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := noSNI.Get(url); err == nil || !strings.Contains(err.Error(), "unrecognized name") {
		t.Errorf("no SNI: %v (%v), want the handshake refused (unrecognized_name)", resp, err)
	}
	if n := forwarded.Load(); n != int32(served) {
		t.Errorf("the upstream got %d requests, want the %d served ones: a misdirected or refused one was forwarded", n, served)
	}
	// Each misdirected request is in the access log, as any refused target.
	poll(t, 5*time.Second, "the misdirected requests are not all in the access log", func() bool {
		n := 0
		for _, ev := range g.logs.Events("access") {
			if ev["status"] == 421.0 && ev["decision"] == "badRequest" {
				n++
			}
		}
		return n == 6
	})
	// Each refused handshake is counted by why; plain HTTP on the TLS port
	// too (curl, a real client, gets net/http's 400).
	if out, err := exec.Command(needTool(t, "curl", "curl"), "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}", "http://"+g.TLSAddr+"/p").Output(); err != nil || string(out) != "400" {
		t.Errorf("plain HTTP to the TLS port: curl %q (%v), want 400", out, err)
	}
	poll(t, 5*time.Second, "the failed handshakes were not all counted", func() bool {
		m := metrics(t, g.gateway)
		return m[`sluice_tls_handshake_errors_total{reason="unknown_name"}`] == 4 &&
			m[`sluice_tls_handshake_errors_total{reason="not_tls"}`] == 1
	})
	if m := metrics(t, g.gateway); m[`sluice_tls_handshake_errors_total{reason="version"}`] != 0 {
		t.Errorf("version failures counted: %v, want 0", m[`sluice_tls_handshake_errors_total{reason="version"}`])
	}
}

// TestEdgeHTTP2StreamsAreRequests: 20 streams at once on one HTTP/2
// connection, against a rule of count 5, give exactly 5 passes, over h2
// (TLS) and h2c alike; the blocked ones carry the usual headers; the
// passed ones go upstream over HTTP/1.1 on the fast path.
func TestEdgeHTTP2StreamsAreRequests(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "e2e CA")
	dir := t.TempDir()
	edgePair(t, ca, dir, "shop", "shop.example.com")
	up := echoUpstream(t)
	g := startEdge(t, dir, fmt.Sprintf(`
tls:
  listen: "127.0.0.1:0"
  certificates: [{ certFile: shop.crt, keyFile: shop.key }]
http2:
  h2c: true
log: { access: true }
upstreams:
  up: { targets: [%q] }
routes:
  - { path: /warm, upstream: up, resource: warm }
  - { path: /tls, upstream: up, resource: tls }
  - { path: /h2c, upstream: up, resource: h2c }
flowRules:
  - { resource: tls, count: 5, statIntervalMs: 60000 }
  - { resource: h2c, count: 5, statIntervalMs: 60000 }
`, up.URL))
	for _, c := range []struct {
		name, url string
		cl        *client
	}{
		{"h2", "https://" + g.TLSAddr + "/tls", newClient("h2", ca.Pool(), "shop.example.com")},
		{"h2c", g.URL + "/h2c", newClient("h2c", nil, "")},
	} {
		// One request first, so the 20 share the connection it opened.
		if resp, _, err := c.cl.do(t, "GET", strings.TrimSuffix(strings.TrimSuffix(c.url, "/tls"), "/h2c")+"/warm", ""); err != nil || resp.ProtoMajor != 2 {
			t.Fatalf("%s warm-up: %v %v", c.name, resp, err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[int]int{}
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				resp, _, err := c.cl.do(t, "GET", c.url, "")
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					codes[-1]++
					return
				}
				codes[resp.StatusCode]++
				if resp.ProtoMajor != 2 {
					codes[-2]++
				}
				if resp.StatusCode == 429 && (resp.Header.Get("X-Sluice-Blocked") != "flow" || resp.Header.Get("RateLimit") == "") {
					codes[-3]++
				}
			}()
		}
		close(start)
		wg.Wait()
		if codes[200] != 5 || codes[429] != 15 || len(codes) != 2 {
			t.Errorf("%s: 20 streams gave %v, want 5 x 200 and 15 x 429 (-1 errors, -2 not HTTP/2, -3 block headers missing)", c.name, codes)
		}
		if n := c.cl.dials.Load(); n != 1 {
			t.Errorf("%s: the client opened %d connections, want 1", c.name, n)
		}
	}
	// The client's protocol does not choose the upstream's: h2 streams
	// went upstream over HTTP/1.1, on the fast path as auto picks it.
	want := fwdExpect("fast", false)
	poll(t, 10*time.Second, "the passes' access log", func() string {
		got := map[string]int{}
		for _, ev := range g.logs.Events("access") {
			if ev["decision"] == "pass" && ev["forwarder"] == want {
				got[ev["path"].(string)]++
			}
		}
		if got["/tls"] != 5 || got["/h2c"] != 5 {
			return fmt.Sprintf("passes on the %s path: %v, want 5 for /tls and /h2c", want, got)
		}
		return ""
	})
	m := metrics(t, g.gateway)
	for series, want := range map[string]float64{`sluice_requests_total{resource="tls",result="pass"}`: 5, `sluice_requests_total{resource="h2c",result="block"}`: 15} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("metrics: %s = %v (exported: %v), want %v", series, got, ok, want)
		}
	}
}

// TestEdgeWebSocketOverTLS: a WebSocket handshake over HTTP/1.1 on the
// TLS listener (h2 offered, http/1.1 chosen by the client) is passed
// through, then bytes both ways.
func TestEdgeWebSocketOverTLS(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "e2e CA")
	dir := t.TempDir()
	edgePair(t, ca, dir, "shop", "shop.example.com")
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\nX-Seen-Proto: %s\r\n\r\n",
			wsAccept(r.Header.Get("Sec-WebSocket-Key")), r.Header.Get("X-Forwarded-Proto"))
		brw.Flush()
		buf := make([]byte, 1024)
		for {
			n, err := brw.Read(buf)
			if err != nil {
				return
			}
			conn.Write([]byte(strings.ToUpper(string(buf[:n]))))
		}
	})
	g := startEdge(t, dir, fmt.Sprintf(`
tls:
  listen: "127.0.0.1:0"
  certificates: [{ certFile: shop.crt, keyFile: shop.key }]
upstreams:
  up: { targets: [%q] }
routes:
  - path: /ws
    upstream: up
`, up.URL))
	conn, err := tls.Dial("tcp", g.TLSAddr, &tls.Config{RootCAs: ca.Pool(), ServerName: "shop.example.com", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br, resp := wsHandshake(t, conn, "shop.example.com")
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" || resp.Header.Get("X-Seen-Proto") != "https" {
		t.Fatalf("handshake: %d %v", resp.StatusCode, resp.Header)
	}
	conn.Write([]byte("hello"))
	got := make([]byte, 5)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "HELLO" {
		t.Fatalf("echo %q, %v", got, err)
	}
}

// TestEdgeReloadWarnsTLSSettings: the listeners are opened at start, so a
// reload that changes tls.* or http2.* warns, naming each setting, and the
// listener keeps serving as it started.
func TestEdgeReloadWarnsTLSSettings(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "e2e CA")
	dir := t.TempDir()
	edgePair(t, ca, dir, "a", "a.test")
	edgePair(t, ca, dir, "b", "b.test")
	up := echoUpstream(t)
	rules := func(tlsExtra, http2 string) string {
		return fmt.Sprintf(`
tls:
  listen: "127.0.0.1:0"
  certificates: [{ certFile: a.crt, keyFile: a.key }%s]
%s
upstreams:
  up: { targets: [%q] }
routes:
  - { path: /*, upstream: up }
`, tlsExtra, http2, up.URL)
	}
	g := startEdge(t, dir, rules("", ""))
	g.writeRules(rules(`, { certFile: b.crt, keyFile: b.key }]
  minVersion: "1.3"
  redirectHttp: true
  clientCAFile: a.crt
  listen2: [`, ""))
	// That file is invalid (listen2): nothing changes and nothing warns.
	g.waitLog("reload failed", 5*time.Second)
	g.writeRules(strings.Replace(rules(`, { certFile: b.crt, keyFile: b.key }`, "http2: { tls: false, h2c: true }"),
		"certificates:", "minVersion: \"1.3\"\n  redirectHttp: true\n  certificates:", 1))
	poll(t, 5*time.Second, "the second rules load", func() bool { return len(g.logs.Events("rules loaded")) >= 2 })
	for _, s := range []string{"tls.certificates", "tls.minVersion", "tls.redirectHttp", "http2.tls", "http2.h2c"} {
		if len(g.logs.Events(s+" changed in the rules file: it takes effect at restart")) != 1 {
			t.Errorf("no warning for %s:\n%s", s, g.logs)
		}
	}
	for _, s := range []string{"tls.listen", "tls.clientCAFile"} {
		if len(g.logs.Events(s+" changed")) != 0 {
			t.Errorf("a warning for %s, which did not change", s)
		}
	}
	// Still h2 with TLS 1.2 allowed, and no redirect on the plain listener.
	resp, _, err := newClient("h2", ca.Pool(), "a.test").do(t, "GET", "https://"+g.TLSAddr+"/x", "")
	if err != nil || resp.ProtoMajor != 2 {
		t.Errorf("after the reload, h2 on the TLS listener: %v %v", resp, err)
	}
	if resp, _, err := newClient("h1", nil, "").do(t, "GET", g.URL+"/x", ""); err != nil || resp.StatusCode != 200 {
		t.Errorf("after the reload, the plain listener: %v %v, want 200 (no redirect until a restart)", resp, err)
	}
}

// TestEdgeHTTP2OffOnTLS: a gateway with the TLS listener only; with
// http2.tls false, h2 is not offered by ALPN: a client that prefers it gets
// HTTP/1.1, and one that speaks only h2 is refused.
func TestEdgeHTTP2OffOnTLS(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "e2e CA")
	dir := t.TempDir()
	edgePair(t, ca, dir, "a", "a.test")
	up := echoUpstream(t)
	// TLS only: listen is "" in the file, and -listen "" overrides the harness's.
	g := startEdge(t, dir, fmt.Sprintf(`
listen: ""
tls:
  listen: "127.0.0.1:0"
  certificates: [{ certFile: a.crt, keyFile: a.key }]
http2: { tls: false }
upstreams:
  up: { targets: [%q] }
routes:
  - { path: /*, upstream: up }
`, up.URL), "-listen", "")
	if l := g.logs.Find("sluice started", 0)["listen"]; l != "" {
		t.Errorf("a plain listener on %v, want none", l)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "a.test"}}}
	resp, err := c.Get("https://" + g.TLSAddr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Proto != "HTTP/1.1" || resp.TLS.NegotiatedProtocol == "h2" {
		t.Errorf("a client preferring h2 got %s (ALPN %q), want HTTP/1.1", resp.Proto, resp.TLS.NegotiatedProtocol)
	}
	if _, _, err := newClient("h2", ca.Pool(), "a.test").do(t, "GET", "https://"+g.TLSAddr+"/x", ""); err == nil {
		t.Error("an h2-only client was served")
	}
}
