package lifecycle

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/internal/testcert"
)

// SIGHUP reloads the TLS certificate files along with the rules file, as
// systemd's ExecReload after a renewal expects (docs/edge.md): a pair that
// does not load is in Reload's error, and the old certificate is still
// served; a renewed pair is served once Reload returns.
func TestReloadReadsTheCertificatesToo(t *testing.T) {
	ca := testcert.NewCA(t, "sighup CA")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := ca.Server(t, time.Now().Add(48*time.Hour).Truncate(time.Second), "127.0.0.1")
	first.Write(t, certFile, keyFile)
	up := upstream(t)
	path, _ := rulesFile(t, up, "tls: {listen: \"127.0.0.1:0\", certificates: [{certFile: "+certFile+", keyFile: "+keyFile+"}]}\nroutes: [{path: /a, upstream: app}]")
	inst, _ := running(t, Options{Config: path, Admin: "off"})
	_, secure, _ := inst.Addrs()
	served := func() time.Time {
		t.Helper()
		c, err := tls.Dial("tcp", secure, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatalf("TLS handshake: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].NotAfter
	}
	if got := served(); !got.Equal(first.Cert.NotAfter) {
		t.Fatalf("served a certificate valid until %v, want %v", got, first.Cert.NotAfter)
	}

	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := inst.Reload(); err == nil || !strings.Contains(err.Error(), path+":3: tls.certificates[0]: ") {
		t.Errorf("Reload with a broken key: %v, want the pair's error at its line, %s:3", err, path)
	}
	if got := served(); !got.Equal(first.Cert.NotAfter) {
		t.Errorf("after a broken renewal: served until %v, want the old certificate's %v", got, first.Cert.NotAfter)
	}

	renewed := ca.Server(t, time.Now().Add(96*time.Hour).Truncate(time.Second), "127.0.0.1")
	renewed.Write(t, certFile, keyFile)
	if err := inst.Reload(); err != nil {
		t.Fatalf("Reload with a renewed pair: %v", err)
	}
	if got := served(); !got.Equal(renewed.Cert.NotAfter) {
		t.Errorf("after Reload: served until %v, want the renewed certificate's %v", got, renewed.Cert.NotAfter)
	}
}

// -listen off turns the plain listener off, as -admin off does the admin
// one: the TLS listener alone serves traffic, and the file's listen is not
// opened (before, -listen "" meant the file's listen, so no flag could).
func TestListenOffLeavesTheTLSListener(t *testing.T) {
	ca := testcert.NewCA(t, "listen off CA")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.Server(t, time.Now().Add(48*time.Hour), "127.0.0.1").Write(t, certFile, keyFile)
	up := upstream(t)
	path, _ := rulesFile(t, up, "tls: {listen: \"127.0.0.1:0\", certificates: [{certFile: "+certFile+", keyFile: "+keyFile+"}]}\nroutes: [{path: /a, upstream: app}]")
	inst, plain := running(t, Options{Config: path, Listen: "off", Admin: "off"})
	_, secure, _ := inst.Addrs()
	if plain != "" || secure == "" {
		t.Fatalf("listening on plain %q and TLS %q; want TLS alone", plain, secure)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	resp, err := c.Get("https://" + secure + "/a")
	if err != nil {
		t.Fatalf("GET over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET over TLS: %d, want 200 from the upstream", resp.StatusCode)
	}
}
