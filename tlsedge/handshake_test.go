package tlsedge

import (
	"crypto/tls"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/internal/testcert"
)

// lines collects an http.Server's log lines.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, strings.TrimSpace(string(p)))
	return len(p), nil
}

// next waits for the line after the first n.
func (l *lines) next(t *testing.T, n int) (string, bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		l.mu.Lock()
		if len(l.all) > n {
			s := l.all[n]
			l.mu.Unlock()
			return s, true
		}
		l.mu.Unlock()
	}
	return "", false
}

// serveHTTPS runs net/http's server on s's config, as the gateway does,
// with readHeaderTimeout bounding the handshake, and returns its address
// and its log.
func serveHTTPS(t *testing.T, s *Store, readHeaderTimeout time.Duration) (string, *lines) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logged := &lines{}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		TLSConfig:         s.TLSConfig(),
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          log.New(logged, "", 0),
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close(); <-done })
	return ln.Addr().String(), logged
}

// Every reason sluice_tls_handshake_errors_total names is what
// HandshakeFailure reads from net/http's log line for a client that fails
// that way, with the crypto/tls and net/http this binary is built with: a
// Go release that words an error anew shows here as "other".
func TestHandshakeFailureReasons(t *testing.T) {
	ca := testcert.NewCA(t, "server CA")
	clients := testcert.NewCA(t, "client CA")
	dir := t.TempDir()
	ca.Server(t, time.Now().Add(time.Hour), "a.test").Write(t, filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key"))
	writeFile(t, filepath.Join(dir, "clients.pem"), clients.PEM)
	strict, err := New(Options{Dir: dir, Pairs: []Pair{{"a.crt", "a.key"}}, StrictSNI: true, ClientCAFile: "clients.pem"})
	if err != nil {
		t.Fatal(err)
	}
	tls13, err := New(Options{Dir: dir, Pairs: []Pair{{"a.crt", "a.key"}}, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	addrs, logs := map[*Store]string{}, map[*Store]*lines{}
	for _, s := range []*Store{strict, tls13} {
		addrs[s], logs[s] = serveHTTPS(t, s, 300*time.Millisecond)
	}
	alice := clients.Client(t, "alice")
	raw := func(b string, wait time.Duration) func(string) {
		return func(addr string) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if b != "" {
				c.Write([]byte(b))
			}
			time.Sleep(wait)
		}
	}
	handshake := func(cfg *tls.Config) func(string) {
		return func(addr string) {
			cfg.ServerName = "a.test"
			if cfg.RootCAs == nil {
				cfg.RootCAs = ca.Pool()
			}
			if _, err := dial(addr, cfg.ServerName, cfg); err == nil {
				t.Errorf("handshake %+v succeeded", cfg)
			}
		}
	}
	for _, tt := range []struct {
		name   string
		store  *Store
		client func(addr string)
		want   string
	}{
		{"plain HTTP on the TLS port", strict, raw("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", 100*time.Millisecond), HandshakeNotTLS},
		{"bytes that are no TLS record", strict, raw("\x00\x01\x02\x03\x04\x05\x06\x07", 100*time.Millisecond), HandshakeNotTLS},
		{"connect and close", strict, raw("", 0), HandshakeClosed},
		{"connect and wait past readHeaderTimeout", strict, raw("", time.Second), HandshakeTimeout},
		{"strict SNI, a name without a certificate", strict, func(addr string) {
			if _, err := dial(addr, "b.test", &tls.Config{RootCAs: ca.Pool()}); err == nil {
				t.Error("SNI b.test: handshake succeeded")
			}
		}, HandshakeUnknownName},
		{"TLS 1.2 client, minVersion 1.3", tls13, handshake(&tls.Config{MaxVersion: tls.VersionTLS12}), HandshakeVersion},
		{"CBC suites only", strict, handshake(&tls.Config{MaxVersion: tls.VersionTLS12,
			CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}), HandshakeCipher},
		{"mTLS, no client certificate", strict, handshake(&tls.Config{}), HandshakeClientCert},
		{"mTLS, a certificate of another CA", strict, handshake(&tls.Config{
			Certificates: []tls.Certificate{testcert.NewCA(t, "another CA").Client(t, "mallory").TLS}}), HandshakeClientCert},
		{"the client distrusts the served certificate", strict, handshake(&tls.Config{
			RootCAs: clients.Pool(), Certificates: []tls.Certificate{alice.TLS}}), HandshakeCertRejected},
	} {
		l := logs[tt.store]
		l.mu.Lock()
		n := len(l.all)
		l.mu.Unlock()
		tt.client(addrs[tt.store])
		line, ok := l.next(t, n)
		if !ok {
			t.Errorf("%s: net/http logged nothing", tt.name)
			continue
		}
		if got, ok := HandshakeFailure(line); !ok || got != tt.want {
			t.Errorf("%s: %q read as %q (%v), want %q", tt.name, line, got, ok, tt.want)
		}
	}
	for _, line := range []string{
		"http2: server: error reading preface from client 127.0.0.1:1: EOF",
		"http: Accept error: accept tcp: too many open files; retrying in 5ms",
	} {
		if r, ok := HandshakeFailure(line); ok {
			t.Errorf("%q read as a handshake failure (%s)", line, r)
		}
	}
	if r, _ := HandshakeFailure("http: TLS handshake error from [::1]:5: tls: something new"); r != HandshakeOther {
		t.Errorf("an unknown error read as %q, want %q", r, HandshakeOther)
	}
}
