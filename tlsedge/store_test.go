package tlsedge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"sluice/internal/testcert"
)

// server serves TLS with the store's config on loopback: each connection
// completes its handshake, gets one byte and is closed.
func server(t *testing.T, s *Store) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	tl := tls.NewListener(ln, s.TLSConfig())
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if err := c.(*tls.Conn).Handshake(); err != nil {
					t.Log("server handshake:", err)
				} else {
					if _, err := c.Write([]byte{1}); err != nil {
						t.Log("server write:", err)
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial handshakes with sni (and cfg's client settings) and reads the
// server's byte, so that a refused client certificate shows here in TLS 1.3
// too; it returns the served leaf.
func dial(addr, sni string, cfg *tls.Config) (*x509.Certificate, error) {
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg = cfg.Clone()
	cfg.ServerName = sni
	if cfg.RootCAs == nil {
		cfg.InsecureSkipVerify = true // the test looks at which certificate came, not at trust
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Which certificate each SNI gets, and with tls.strictSni which are
// refused (nil): a name no certificate covers, and no SNI at all, get the
// alert unrecognized_name instead of the first certificate.
func TestSNIPicksExactThenWildcardThenFirst(t *testing.T) {
	ca := testcert.NewCA(t, "test CA")
	dir := t.TempDir()
	exp := time.Now().Add(48 * time.Hour)
	shop := ca.Server(t, exp, "shop.example.com", "www.shop.example.com")
	wild := ca.Server(t, exp, "*.example.com")
	other := ca.Server(t, exp, "other.test")
	shop.Write(t, filepath.Join(dir, "shop.crt"), filepath.Join(dir, "shop.key"))
	wild.Write(t, filepath.Join(dir, "wild.crt"), filepath.Join(dir, "wild.key"))
	other.Write(t, filepath.Join(dir, "other.crt"), filepath.Join(dir, "other.key"))
	stores := map[bool]*Store{}
	addrs := map[bool]string{}
	for _, strict := range []bool{false, true} {
		s, err := New(Options{Dir: dir, StrictSNI: strict, Pairs: []Pair{
			{"shop.crt", "shop.key"}, {"wild.crt", "wild.key"}, {"other.crt", "other.key"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		stores[strict], addrs[strict] = s, server(t, s)
	}
	s, addr := stores[false], addrs[false]
	tests := []struct {
		sni          string
		want, strict *testcert.Leaf
	}{
		{"shop.example.com", shop, shop},
		{"www.shop.example.com", shop, shop},
		{"SHOP.Example.COM", shop, shop},
		{"api.example.com", wild, wild},
		{"a.b.example.com", shop, nil}, // a TLS wildcard covers one label: the first certificate
		{"example.com", shop, nil},
		{"other.test", other, other},
		{"unknown.org", shop, nil},
		{"", shop, nil}, // no SNI at all
	}
	for _, tt := range tests {
		for _, strict := range []bool{false, true} {
			want := tt.want
			if strict {
				want = tt.strict
			}
			got, err := dial(addrs[strict], tt.sni, nil)
			switch {
			case want == nil && (err == nil || !strings.Contains(err.Error(), "unrecognized name")):
				t.Errorf("strict, SNI %q: got %v (%v), want the handshake refused with unrecognized_name", tt.sni, got, err)
			case want == nil:
			case err != nil:
				t.Errorf("strict %v, SNI %q: %v", strict, tt.sni, err)
			case got.SerialNumber.Cmp(want.Cert.SerialNumber) != 0:
				t.Errorf("strict %v, SNI %q: served %v, want %v", strict, tt.sni, got.DNSNames, want.Cert.DNSNames)
			}
		}
	}
	// A client that checks the chain accepts what it is served.
	if _, err := dial(addr, "api.example.com", &tls.Config{RootCAs: ca.Pool()}); err != nil {
		t.Errorf("verified handshake for api.example.com: %v", err)
	}
	// A trailing dot never reaches the wire from Go's client; the lookup
	// drops it all the same.
	c, _ := s.cur.Load().certificate(&tls.ClientHelloInfo{ServerName: "Shop.Example.com."})
	if c.Leaf.SerialNumber.Cmp(shop.Cert.SerialNumber) != 0 {
		t.Errorf("trailing dot: served %v", c.Leaf.DNSNames)
	}
	infos := s.Certificates()
	if len(infos) != 3 || infos[0].Name != "shop.example.com" || infos[1].Name != "*.example.com" || infos[2].Name != "other.test" {
		t.Fatalf("Certificates() = %+v", infos)
	}
	if !infos[0].NotAfter.Equal(exp.Truncate(time.Second)) {
		t.Errorf("NotAfter = %v, want %v", infos[0].NotAfter, exp.Truncate(time.Second))
	}
}

func TestMinVersion(t *testing.T) {
	ca := testcert.NewCA(t, "test CA")
	dir := t.TempDir()
	ca.Server(t, time.Now().Add(time.Hour), "a.test").Write(t, filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key"))
	for _, tt := range []struct {
		min, clientMax uint16
		ok             bool
	}{
		{tls.VersionTLS12, tls.VersionTLS12, true},
		{tls.VersionTLS13, tls.VersionTLS13, true},
		{tls.VersionTLS13, tls.VersionTLS12, false},
		{0, tls.VersionTLS11, false}, // the default is 1.2
	} {
		s, err := New(Options{Dir: dir, Pairs: []Pair{{"a.crt", "a.key"}}, MinVersion: tt.min})
		if err != nil {
			t.Fatal(err)
		}
		_, err = dial(server(t, s), "a.test", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tt.clientMax})
		if (err == nil) != tt.ok {
			t.Errorf("min %#x, client max %#x: err %v, want ok=%v", tt.min, tt.clientMax, err, tt.ok)
		}
	}
	if _, err := New(Options{Dir: dir, Pairs: []Pair{{"a.crt", "a.key"}}, MinVersion: tls.VersionTLS11}); err == nil {
		t.Error("MinVersion TLS 1.1 accepted")
	}
}

// TestTLS12OffersAEADsOnly: a TLS 1.2 client gets a forward-secret AEAD
// suite or no handshake at all: one offering only ECDHE with AES-CBC (Go's
// defaults had them; LUCKY13 targets them) is refused, with an ECDSA and
// with an RSA certificate; one offering GCM or ChaCha20 succeeds. Every
// suite Go can speak is tried alone, and exactly the six AEAD ones pass.
func TestTLS12OffersAEADsOnly(t *testing.T) {
	ca := testcert.NewCA(t, "test CA")
	dir := t.TempDir()
	ca.Server(t, time.Now().Add(time.Hour), "a.test").Write(t, filepath.Join(dir, "ec.crt"), filepath.Join(dir, "ec.key"))
	ca.ServerRSA(t, time.Now().Add(time.Hour), "a.test").Write(t, filepath.Join(dir, "rsa.crt"), filepath.Join(dir, "rsa.key"))
	addrs := map[string]string{}
	for _, kind := range []string{"ec", "rsa"} {
		s, err := New(Options{Dir: dir, Pairs: []Pair{{kind + ".crt", kind + ".key"}}})
		if err != nil {
			t.Fatal(err)
		}
		addrs[kind] = server(t, s)
	}
	tls12 := func(kind string, suites ...uint16) error {
		_, err := dial(addrs[kind], "a.test", &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS12, CipherSuites: suites})
		return err
	}
	for _, c := range []struct {
		name, cert string
		suites     []uint16
		ok         bool
	}{
		{"ECDHE-ECDSA-AES128-SHA", "ec", []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}, false},
		{"ECDHE-ECDSA-AES256-SHA", "ec", []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA}, false},
		{"ECDHE-RSA-AES256-SHA", "rsa", []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA}, false},
		{"ECDHE-RSA-AES128-SHA", "rsa", []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}, false},
		{"both CBC suites", "ec", []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA}, false},
		{"ECDHE-ECDSA-AES128-GCM-SHA256", "ec", []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, true},
		{"ECDHE-RSA-AES256-GCM-SHA384", "rsa", []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}, true},
		{"ECDHE-RSA-CHACHA20-POLY1305", "rsa", []uint16{tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}, true},
		{"CBC and GCM: GCM is chosen", "ec", []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, true},
	} {
		if err := tls12(c.cert, c.suites...); (err == nil) != c.ok {
			t.Errorf("TLS 1.2 client offering %s (%s certificate): err %v, want ok=%v", c.name, c.cert, err, c.ok)
		}
	}
	var accepted []string
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if !slices.Contains(cs.SupportedVersions, tls.VersionTLS12) {
			continue
		}
		for _, kind := range []string{"ec", "rsa"} {
			if tls12(kind, cs.ID) == nil {
				accepted = append(accepted, cs.Name)
			}
		}
	}
	slices.Sort(accepted)
	want := []string{
		"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
		"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
		"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	}
	if !slices.Equal(accepted, want) {
		t.Errorf("TLS 1.2 suites a client can get:\n%v\nwant the forward-secret AEADs only:\n%v", accepted, want)
	}
}

func TestClientCertificateRequired(t *testing.T) {
	ca := testcert.NewCA(t, "server CA")
	clients := testcert.NewCA(t, "client CA")
	strangers := testcert.NewCA(t, "another CA")
	dir := t.TempDir()
	ca.Server(t, time.Now().Add(time.Hour), "a.test").Write(t, filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key"))
	writeFile(t, filepath.Join(dir, "clients.pem"), clients.PEM)
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		s, err := New(Options{Dir: dir, Pairs: []Pair{{"a.crt", "a.key"}}, ClientCAFile: "clients.pem"})
		if err != nil {
			t.Fatal(err)
		}
		addr := server(t, s)
		good, bad := clients.Client(t, "alice"), strangers.Client(t, "mallory")
		tests := []struct {
			name  string
			certs []tls.Certificate
			ok    bool
		}{
			{"no client certificate", nil, false},
			{"signed by another CA", []tls.Certificate{bad.TLS}, false},
			{"signed by the client CA", []tls.Certificate{good.TLS}, true},
		}
		for _, tt := range tests {
			_, err := dial(addr, "a.test", &tls.Config{RootCAs: ca.Pool(), Certificates: tt.certs, MaxVersion: v})
			if (err == nil) != tt.ok {
				t.Errorf("TLS %#x, %s: err %v, want ok=%v", v, tt.name, err, tt.ok)
			}
		}
	}
	if _, err := New(Options{Dir: dir, Pairs: []Pair{{"a.crt", "a.key"}}, ClientCAFile: "a.key"}); err == nil ||
		!strings.Contains(err.Error(), "clientCAFile") {
		t.Errorf("a CA file with no certificate: err %v", err)
	}
}

func TestNewNamesTheFilesThatFail(t *testing.T) {
	ca := testcert.NewCA(t, "test CA")
	dir := t.TempDir()
	ca.Server(t, time.Now().Add(time.Hour), "a.test").Write(t, filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key"))
	ca.Server(t, time.Now().Add(time.Hour), "b.test").Write(t, filepath.Join(dir, "b.crt"), filepath.Join(dir, "b.key"))
	tests := []struct {
		name string
		pair Pair
		want string
	}{
		{"missing", Pair{"nope.crt", "a.key"}, "certificates[1]: " + filepath.Join(dir, "nope.crt")},
		{"key of another certificate", Pair{"a.crt", "b.key"}, "private key does not match public key"},
	}
	for _, tt := range tests {
		_, err := New(Options{Dir: dir, Pairs: []Pair{{"b.crt", "b.key"}, tt.pair}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

// watched is a Store under watch, recording each reload outcome.
type watched struct {
	*Store
	mu      sync.Mutex
	results []error
}

func startWatch(t *testing.T, opts Options) *watched {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return watchStore(t, s)
}

// watchStore watches s until the test ends; it returns once the watch is
// in place.
func watchStore(t *testing.T, s *Store) *watched {
	t.Helper()
	w := &watched{Store: s}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.watch(ctx, 50*time.Millisecond, zerolog.Nop(), func(err error) {
			w.mu.Lock()
			w.results = append(w.results, err)
			w.mu.Unlock()
		}, ready)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("watch returned early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not start")
	}
	return w
}

// waitServed polls new handshakes until leaf is served.
func waitServed(t *testing.T, addr, sni string, leaf *testcert.Leaf) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got *x509.Certificate
	for time.Now().Before(deadline) {
		var err error
		if got, err = dial(addr, sni, nil); err == nil && got.SerialNumber.Cmp(leaf.Cert.SerialNumber) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("serial %v never served (last %v)", leaf.Cert.SerialNumber, got.SerialNumber)
}

func (w *watched) lastResult(t *testing.T, wantErr bool) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		n := len(w.results)
		var last error
		if n > 0 {
			last = w.results[n-1]
		}
		w.mu.Unlock()
		if n > 0 && (last != nil) == wantErr {
			return last
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no reload with error=%v", wantErr)
	return nil
}

// layout is how a deployment puts a certificate on disk and renews it.
type layout struct {
	name string
	// install writes the first pair and returns the paths sluice is given.
	install func(t *testing.T, dir string, l *testcert.Leaf) (certFile, keyFile string)
	// renew replaces the pair the way that deployment's tool does.
	renew func(t *testing.T, dir string, l *testcert.Leaf, gen int)
}

var layouts = []layout{
	{
		name: "files renamed into place",
		install: func(t *testing.T, dir string, l *testcert.Leaf) (string, string) {
			l.Write(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
			return "tls.crt", "tls.key"
		},
		renew: func(t *testing.T, dir string, l *testcert.Leaf, _ int) {
			l.Write(t, filepath.Join(dir, ".tls.crt.tmp"), filepath.Join(dir, ".tls.key.tmp"))
			rename(t, filepath.Join(dir, ".tls.crt.tmp"), filepath.Join(dir, "tls.crt"))
			rename(t, filepath.Join(dir, ".tls.key.tmp"), filepath.Join(dir, "tls.key"))
		},
	},
	{
		// certbot: live/NAME/fullchain.pem -> ../../archive/NAME/fullchainN.pem,
		// each link re-pointed on renewal.
		name: "certbot live/ symlinks re-pointed",
		install: func(t *testing.T, dir string, l *testcert.Leaf) (string, string) {
			certbotRenew(t, dir, l, 1)
			return "live/shop/fullchain.pem", "live/shop/privkey.pem"
		},
		renew: certbotRenew,
	},
	{
		// A Kubernetes secret volume: tls.crt -> ..data/tls.crt, ..data ->
		// ..TIMESTAMP; an update writes a new ..TIMESTAMP and swaps ..data.
		name: "Kubernetes secret ..data swap",
		install: func(t *testing.T, dir string, l *testcert.Leaf) (string, string) {
			k8sRenew(t, dir, l, 1)
			symlink(t, "..data/tls.crt", filepath.Join(dir, "tls.crt"))
			symlink(t, "..data/tls.key", filepath.Join(dir, "tls.key"))
			return "tls.crt", "tls.key"
		},
		renew: k8sRenew,
	},
}

func certbotRenew(t *testing.T, dir string, l *testcert.Leaf, gen int) {
	arch, live := filepath.Join(dir, "archive", "shop"), filepath.Join(dir, "live", "shop")
	n := string(rune('0' + gen))
	writeFile(t, filepath.Join(arch, "fullchain"+n+".pem"), l.CertPEM)
	writeFile(t, filepath.Join(arch, "privkey"+n+".pem"), l.KeyPEM)
	if err := os.MkdirAll(live, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"fullchain", "privkey"} {
		tmp := filepath.Join(live, f+".pem.new")
		symlink(t, "../../archive/shop/"+f+n+".pem", tmp)
		rename(t, tmp, filepath.Join(live, f+".pem"))
	}
}

func k8sRenew(t *testing.T, dir string, l *testcert.Leaf, gen int) {
	ts := "..2026_01_0" + string(rune('0'+gen))
	writeFile(t, filepath.Join(dir, ts, "tls.crt"), l.CertPEM)
	writeFile(t, filepath.Join(dir, ts, "tls.key"), l.KeyPEM)
	symlink(t, ts, filepath.Join(dir, "..data_tmp"))
	rename(t, filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data"))
}

func symlink(t *testing.T, to, at string) {
	t.Helper()
	if err := os.Symlink(to, at); err != nil {
		t.Fatal(err)
	}
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func TestRenewalServedToNewConnections(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	ca := testcert.NewCA(t, "test CA")
	for _, lay := range layouts {
		t.Run(lay.name, func(t *testing.T) {
			dir := t.TempDir()
			v1 := ca.Server(t, time.Now().Add(time.Hour), "shop.example.com")
			cf, kf := lay.install(t, dir, v1)
			w := startWatch(t, Options{Dir: dir, Pairs: []Pair{{cf, kf}}})
			addr := server(t, w.Store)
			waitServed(t, addr, "shop.example.com", v1)

			// A connection made before the renewal keeps its certificate.
			before, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "shop.example.com", RootCAs: ca.Pool()})
			if err != nil {
				t.Fatal(err)
			}
			defer before.Close()

			v2 := ca.Server(t, time.Now().Add(90*24*time.Hour), "shop.example.com")
			lay.renew(t, dir, v2, 2)
			waitServed(t, addr, "shop.example.com", v2)
			if w.lastResult(t, false) != nil {
				t.Fatal("unreachable")
			}
			if got := w.Certificates()[0].NotAfter; !got.Equal(v2.Cert.NotAfter) {
				t.Errorf("expiry after renewal %v, want %v", got, v2.Cert.NotAfter)
			}
			if got := before.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(v1.Cert.SerialNumber) != 0 {
				t.Errorf("the connection made before the renewal changed certificate")
			}
		})
	}
}

// TestRenewalBeforeTheWatchStarts: a renewal written after the files were
// first loaded (at start, before the listener) but before the watch was in
// place is served once the watch is: nothing else would load it until the
// next renewal, months later, after the old certificate expired.
func TestRenewalBeforeTheWatchStarts(t *testing.T) {
	ca := testcert.NewCA(t, "test CA")
	dir := t.TempDir()
	v1 := ca.Server(t, time.Now().Add(time.Hour), "shop.example.com")
	v1.Write(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	s, err := New(Options{Dir: dir, Pairs: []Pair{{"tls.crt", "tls.key"}}})
	if err != nil {
		t.Fatal(err)
	}
	addr := server(t, s)
	v2 := ca.Server(t, time.Now().Add(90*24*time.Hour), "shop.example.com")
	v2.Write(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	watchStore(t, s)
	waitServed(t, addr, "shop.example.com", v2)
}

func TestBrokenRenewalKeepsTheOldCertificate(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	ca := testcert.NewCA(t, "test CA")
	dir := t.TempDir()
	v1 := ca.Server(t, time.Now().Add(time.Hour), "shop.example.com")
	other := ca.Server(t, time.Now().Add(time.Hour), "other.test")
	v1.Write(t, filepath.Join(dir, "shop.crt"), filepath.Join(dir, "shop.key"))
	other.Write(t, filepath.Join(dir, "other.crt"), filepath.Join(dir, "other.key"))
	w := startWatch(t, Options{Dir: dir, Pairs: []Pair{{"shop.crt", "shop.key"}, {"other.crt", "other.key"}}})
	addr := server(t, w.Store)

	steps := []struct {
		name    string
		change  func()
		wantErr string // "" = the reload succeeds
		served  *testcert.Leaf
	}{
		{
			// cp or cat > caught between the leaf and the intermediate:
			// the standard library loads the leaf alone.
			name: "full chain half-written",
			change: func() {
				writeFile(t, filepath.Join(dir, "shop.crt"), append(slices.Clip(v1.CertPEM), ca.PEM[:len(ca.PEM)/2]...))
			},
			wantErr: filepath.Join(dir, "shop.crt") + ": 1 of its 2 PEM blocks do not decode",
			served:  v1,
		},
		{
			name: "key half-written",
			change: func() {
				writeFile(t, filepath.Join(dir, "shop.crt"), v1.CertPEM)
				writeFile(t, filepath.Join(dir, "shop.key"), v1.KeyPEM[:len(v1.KeyPEM)-40])
			},
			wantErr: filepath.Join(dir, "shop.key") + ": 1 of its 1 PEM blocks do not decode",
			served:  v1,
		},
		{
			name:    "certificate file truncated",
			change:  func() { writeFile(t, filepath.Join(dir, "shop.crt"), v1.CertPEM[:40]) },
			wantErr: "certificates[0]: " + filepath.Join(dir, "shop.crt"),
			served:  v1,
		},
		{
			name: "key of another certificate",
			change: func() {
				writeFile(t, filepath.Join(dir, "shop.crt"), v1.CertPEM)
				writeFile(t, filepath.Join(dir, "shop.key"), other.KeyPEM)
			},
			wantErr: "private key does not match public key",
			served:  v1,
		},
		{
			name:    "key deleted",
			change:  func() { os.Remove(filepath.Join(dir, "shop.key")) },
			wantErr: "no such file or directory",
			served:  v1,
		},
	}
	for _, st := range steps {
		st.change()
		err := w.lastResult(t, true)
		if err == nil {
			t.Fatalf("%s: the reload succeeded, want %q", st.name, st.wantErr)
		}
		if !strings.Contains(err.Error(), st.wantErr) {
			t.Errorf("%s: reload error %q, want it to contain %q", st.name, err, st.wantErr)
		}
		if got, err := dial(addr, "shop.example.com", nil); err != nil || got.SerialNumber.Cmp(st.served.Cert.SerialNumber) != 0 {
			t.Errorf("%s: served %v (err %v), want the old certificate", st.name, got, err)
		}
		if got, err := dial(addr, "other.test", nil); err != nil || got.SerialNumber.Cmp(other.Cert.SerialNumber) != 0 {
			t.Errorf("%s: the other pair is no longer served (err %v)", st.name, err)
		}
		w.mu.Lock()
		w.results = nil
		w.mu.Unlock()
	}

	// A good pair afterwards is served, and the reload reports no error.
	v2 := ca.Server(t, time.Now().Add(2*time.Hour), "shop.example.com")
	v2.Write(t, filepath.Join(dir, "shop.crt"), filepath.Join(dir, "shop.key"))
	waitServed(t, addr, "shop.example.com", v2)
	if err := w.lastResult(t, false); err != nil {
		t.Fatal(err)
	}
}

func TestReloadReportsEveryPairThatFailed(t *testing.T) {
	ca := testcert.NewCA(t, "test CA")
	dir := t.TempDir()
	ca.Server(t, time.Now().Add(time.Hour), "a.test").Write(t, filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key"))
	ca.Server(t, time.Now().Add(time.Hour), "b.test").Write(t, filepath.Join(dir, "b.crt"), filepath.Join(dir, "b.key"))
	writeFile(t, filepath.Join(dir, "ca.pem"), ca.PEM)
	s, err := New(Options{Dir: dir, Pairs: []Pair{{"a.crt", "a.key"}, {"b.crt", "b.key"}}, ClientCAFile: "ca.pem"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.key", "b.crt", "ca.pem"} {
		writeFile(t, filepath.Join(dir, f), []byte("garbage"))
	}
	err = s.Reload()
	var parts []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		parts = append(parts, strings.SplitN(e.Error(), ":", 3)[1])
	}
	if got := strings.Join(parts, ","); got != " certificates[0], certificates[1], clientCAFile" {
		t.Errorf("reload errors name %q", got)
	}
	if len(s.Certificates()) != 2 || s.Certificates()[0].Name != "a.test" || s.cur.Load().caPool == nil {
		t.Error("what failed was not kept")
	}
}

// TestReadPEMRefusesABlockThatDoesNotEnd: a block that begins (where
// encoding/pem looks for one, at a line's start) and does not decode makes
// the file unreadable; text around whole blocks does not, even text that
// names a block's start within a line.
func TestReadPEMRefusesABlockThatDoesNotEnd(t *testing.T) {
	ca := testcert.NewCA(t, "test CA")
	leaf := ca.Server(t, time.Now().Add(time.Hour), "a.test")
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		file []byte
		ok   bool
	}{
		{"a chain", append(slices.Clip(leaf.CertPEM), ca.PEM...), true},
		{"subject lines around the blocks", []byte("subject=CN = a.test\n" + string(leaf.CertPEM) + "issuer=CN = test CA\n" + string(ca.PEM)), true},
		{"a start named within a line", []byte("# each block starts with -----BEGIN CERTIFICATE-----\n" + string(leaf.CertPEM)), true},
		{"cut inside the second block", append(slices.Clip(leaf.CertPEM), ca.PEM[:len(ca.PEM)/2]...), false},
		{"cut inside the only block", leaf.CertPEM[:len(leaf.CertPEM)-30], false},
	} {
		f := filepath.Join(dir, "f.pem")
		writeFile(t, f, tc.file)
		if _, err := readPEM(f); (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
