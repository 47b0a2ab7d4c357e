package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sluice/internal/testcert"
)

// edgeGateway is a sluice process with a TLS listener.
type edgeGateway struct {
	*gateway
	TLSAddr string // 127.0.0.1:port of tls.listen
	Dir     string // the rules file's directory, where the certificates are
}

// startEdge writes rules into dir (which holds the certificate files the
// rules name) and starts sluice; tls.listen should be "127.0.0.1:0".
func startEdge(t *testing.T, dir, rules string, args ...string) *edgeGateway {
	t.Helper()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGatewayFile(t, path, args...)
	e := &edgeGateway{gateway: g, Dir: dir}
	if s, _ := g.logs.Find("sluice started", 0)["tls"].(string); s != "" {
		e.TLSAddr = s
		// A renewal is seen only once the certificate files are watched.
		g.waitLog("watching the TLS certificate files", 10*time.Second)
	}
	return e
}

// echoUpstream answers with what it saw: the protocol it was spoken to in,
// X-Forwarded-Proto, the Host and the path.
func echoUpstream(t *testing.T) *upstream {
	return startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(echoed{Proto: r.Proto, XFP: r.Header.Get("X-Forwarded-Proto"), Host: r.Host, Path: r.URL.Path})
	})
}

type echoed struct {
	Proto, XFP, Host, Path string
}

// client makes clients of the TLS listener (or of the plain one) in a
// given protocol, counting the connections they open.
type client struct {
	*http.Client
	dials atomic.Int32
}

// newClient: proto "h1" or "h2" over TLS (verified against roots, for
// the name sni, with certs as client certificates), or "h2c" / "h1" on
// the plain listener when roots is nil.
func newClient(proto string, roots *x509.CertPool, sni string, certs ...tls.Certificate) *client {
	c := &client{}
	var p http.Protocols
	switch proto {
	case "h1":
		p.SetHTTP1(true)
	case "h2":
		p.SetHTTP2(true)
	case "h2c":
		p.SetUnencryptedHTTP2(true)
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		Protocols: &p,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c.dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		MaxConnsPerHost:   1,
		ForceAttemptHTTP2: proto == "h2",
	}
	if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, ServerName: sni, Certificates: certs}
	}
	c.Client = &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c
}

// do sends one request with Host host (if not "") and returns the answer
// and its body.
func (c *client) do(t *testing.T, method, url, host string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// edgePair writes a certificate for names to dir/base.crt and dir/base.key.
func edgePair(t *testing.T, ca *testcert.CA, dir, base string, names ...string) *testcert.Leaf {
	t.Helper()
	l := ca.Server(t, time.Now().Add(30*24*time.Hour), names...)
	l.Write(t, filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key"))
	return l
}

// needTool returns the path of a command the test needs: under CI=true
// a missing one fails the test (.ci/run installs it), elsewhere it skips
// loudly.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s NEEDED (CI=true): apt-get install %s", strings.ToUpper(name), pkg)
	}
	t.Skipf("SKIPPED, %s NEEDED: apt-get install %s (this test fails instead under CI=true)", strings.ToUpper(name), pkg)
	return ""
}

func unixString(tm time.Time) string {
	return strconv.FormatFloat(float64(tm.Unix()), 'g', -1, 64)
}
