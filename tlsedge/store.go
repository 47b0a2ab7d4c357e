// Package tlsedge serves sluice's HTTPS listener: certificates loaded from
// PEM files and chosen by SNI, an optional client CA (mTLS), and renewals of
// those files picked up without a restart. It knows nothing of HTTP routing
// or rules; package lifecycle builds a Store and hands its TLSConfig to the listener.
//
// Layer 5 of docs/architecture.md: it imports config only.
package tlsedge

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Pair names one certificate's PEM files: the chain (leaf first) and its key.
type Pair struct {
	CertFile, KeyFile string
}

// Options configure a Store. Relative file names are taken from Dir.
type Options struct {
	// Dir is the directory relative file names are resolved in (the rules
	// file's directory); "" is the working directory.
	Dir string
	// Pairs are served by SNI; the first one also to clients whose SNI
	// matches no certificate (or who send none), unless StrictSNI. At
	// least one is needed.
	Pairs []Pair
	// StrictSNI refuses the handshake of a client whose SNI matches no
	// certificate, or who sends none (tls.strictSni), with the alert
	// unrecognized_name, as Traefik's sniStrict and nginx's
	// ssl_reject_handshake do.
	StrictSNI bool
	// MinVersion is tls.VersionTLS12 or tls.VersionTLS13; 0 is TLS 1.2.
	MinVersion uint16
	// ClientCAFile, when set, makes clients present a certificate signed by
	// one of its CAs (RequireAndVerifyClientCert).
	ClientCAFile string
	// NextProtos are offered by ALPN, in order of preference ("h2",
	// "http/1.1").
	NextProtos []string
	// Locate, if set, rewrites the files' errors (FileErrors, joined) as
	// New, Reload and the log report them: the gateway names each pair at
	// its line in the rules file.
	Locate func(error) error
}

// Info describes one served certificate.
type Info struct {
	// Name is the certificate's first DNS name (its subject's common name
	// when it has none): the label of the expiry metric.
	Name     string
	Names    []string // every name it is served for, wildcards included
	CertFile string   // as resolved
	NotAfter time.Time
}

// Store holds the certificates in force and swaps in renewed ones. The
// *tls.Config it returns reads the certificates of the moment at each
// handshake, so a renewal applies to new connections while established ones
// keep theirs. Safe for concurrent use; build it with New.
type Store struct {
	opts Options
	base *tls.Config
	cur  atomic.Pointer[generation]
	mu   sync.Mutex // serialises loads
}

// generation is one immutable set of certificates and the connection config
// built on it.
type generation struct {
	certs  []loaded // by position in Options.Pairs
	caPool *x509.CertPool
	strict bool                        // Options.StrictSNI
	exact  map[string]*tls.Certificate // lower-case DNS name -> first certificate with it
	wild   map[string]*tls.Certificate // "example.com" -> first certificate for *.example.com
	config *tls.Config
}

type loaded struct {
	cert *tls.Certificate
	info Info
}

// New loads every pair and the client CA; any that does not load is an
// error naming the files, and no Store is returned.
func New(opts Options) (*Store, error) {
	if len(opts.Pairs) == 0 {
		return nil, errors.New("tlsedge: no certificates")
	}
	if opts.MinVersion == 0 {
		opts.MinVersion = tls.VersionTLS12
	}
	if opts.MinVersion != tls.VersionTLS12 && opts.MinVersion != tls.VersionTLS13 {
		return nil, fmt.Errorf("tlsedge: minimum version %#x: must be TLS 1.2 or 1.3", opts.MinVersion)
	}
	s := &Store{opts: opts}
	g, err := s.load(nil)
	if err != nil {
		return nil, err
	}
	s.cur.Store(g)
	s.base = &tls.Config{
		MinVersion:   opts.MinVersion,
		CipherSuites: cipherSuites(),
		NextProtos:   opts.NextProtos,
		// Every handshake takes the generation in force at its start.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load().config, nil
		},
	}
	return s, nil
}

// cipherSuites are the TLS 1.2 suites the edge offers: ECDHE (forward
// secret) with an AEAD, AES-GCM or ChaCha20-Poly1305, for ECDSA and RSA
// certificates. Go's defaults add ECDHE with AES-CBC and HMAC-SHA1, whose
// MAC-then-encrypt padding is what LUCKY13 attacks. TLS 1.3's suites are all
// AEADs and not configurable.
func cipherSuites() []uint16 {
	return []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	}
}

// TLSConfig is the listener's config. Do not modify it.
func (s *Store) TLSConfig() *tls.Config { return s.base }

// Files are every file the Store reads (certificates, keys, client CA), as
// resolved: what a watch must look at.
func (s *Store) Files() []string {
	var out []string
	for _, p := range s.opts.Pairs {
		out = append(out, s.path(p.CertFile), s.path(p.KeyFile))
	}
	if s.opts.ClientCAFile != "" {
		out = append(out, s.path(s.opts.ClientCAFile))
	}
	return out
}

// Certificates describes the certificates in force, in Options.Pairs order.
func (s *Store) Certificates() []Info {
	g := s.cur.Load()
	out := make([]Info, len(g.certs))
	for i, c := range g.certs {
		out[i] = c.info
	}
	return out
}

// Reload reads every file again. A pair (or CA) that loads replaces the old
// one; one that does not keeps what was served before, and is part of the
// returned error. Whatever loaded is in force when Reload returns.
func (s *Store) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.load(s.cur.Load())
	s.cur.Store(g)
	return err
}

// load builds a generation from the files. With prev, what fails to load
// keeps prev's; without, any failure is fatal.
func (s *Store) load(prev *generation) (*generation, error) {
	var errs []error
	g := &generation{certs: make([]loaded, len(s.opts.Pairs)), strict: s.opts.StrictSNI}
	for i, p := range s.opts.Pairs {
		l, err := s.loadPair(p)
		if err != nil {
			errs = append(errs, &FileError{Pair: i, Err: err})
			if prev == nil {
				continue
			}
			l = prev.certs[i]
		}
		g.certs[i] = l
	}
	if f := s.opts.ClientCAFile; f != "" {
		pool, err := loadCA(s.path(f))
		switch {
		case err == nil:
			g.caPool = pool
		case prev != nil:
			g.caPool = prev.caPool
			fallthrough
		default:
			errs = append(errs, &FileError{Pair: -1, Err: err})
		}
	}
	if prev == nil && len(errs) > 0 {
		return nil, s.locate(errors.Join(errs...))
	}
	g.index()
	g.config = &tls.Config{
		MinVersion:     s.opts.MinVersion,
		CipherSuites:   cipherSuites(),
		NextProtos:     s.opts.NextProtos,
		GetCertificate: g.certificate,
	}
	if g.caPool != nil {
		g.config.ClientAuth = tls.RequireAndVerifyClientCert
		g.config.ClientCAs = g.caPool
	}
	return g, s.locate(errors.Join(errs...))
}

func (s *Store) locate(err error) error {
	if err == nil || s.opts.Locate == nil {
		return err
	}
	return s.opts.Locate(err)
}

// FileError is a certificate pair (Pair, an index into Options.Pairs) or
// the client CA (Pair -1) whose files did not load. New and Reload return
// them joined (errors.Join), so that a caller can name each where its
// files are set.
type FileError struct {
	Pair int
	Err  error // names the files
}

func (e *FileError) Error() string {
	if e.Pair < 0 {
		return "tlsedge: clientCAFile: " + e.Err.Error()
	}
	return "tlsedge: certificates[" + strconv.Itoa(e.Pair) + "]: " + e.Err.Error()
}

func (e *FileError) Unwrap() error { return e.Err }

func (s *Store) path(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.opts.Dir, p)
}

func (s *Store) loadPair(p Pair) (loaded, error) {
	cf, kf := s.path(p.CertFile), s.path(p.KeyFile)
	certPEM, err := readPEM(cf)
	var keyPEM []byte
	if err == nil {
		keyPEM, err = readPEM(kf)
	}
	var c tls.Certificate
	if err == nil {
		c, err = tls.X509KeyPair(certPEM, keyPEM)
	}
	if err != nil {
		return loaded{}, fmt.Errorf("%s, %s: %w", cf, kf, err)
	}
	leaf := c.Leaf
	if leaf == nil { // only if x509keypairleaf=0 is set
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return loaded{}, fmt.Errorf("%s: %w", cf, err)
		}
		c.Leaf = leaf
	}
	names := leaf.DNSNames
	if len(names) == 0 && leaf.Subject.CommonName != "" {
		names = []string{leaf.Subject.CommonName}
	}
	info := Info{Names: make([]string, len(names)), CertFile: cf, NotAfter: leaf.NotAfter}
	for i, n := range names {
		info.Names[i] = normalize(n)
	}
	if len(info.Names) > 0 {
		info.Name = info.Names[0]
	} else {
		info.Name = filepath.Base(cf)
	}
	return loaded{cert: &c, info: info}, nil
}

// readPEM reads a PEM file in which every block that begins ends. The
// standard library's readers keep the blocks before one that does not
// decode and say nothing: a fullchain.pem caught half-written (by cp or a
// shell's >, unlike certbot's and Kubernetes' renames) loaded as the leaf
// alone, and clients that need the intermediate failed until the file was
// written again. nginx refuses such a file too. Text around the blocks
// (openssl's subject= lines) is left alone, as both do.
func readPEM(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// A block begins where encoding/pem looks for one: at a line's start.
	begun, ended := bytes.Count(b, []byte("\n-----BEGIN ")), 0
	if bytes.HasPrefix(b, []byte("-----BEGIN ")) {
		begun++
	}
	for rest := b; ; ended++ {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
	}
	if ended < begun {
		return nil, fmt.Errorf("%s: %d of its %d PEM blocks do not decode (a file still being written?)", path, begun-ended, begun)
	}
	return b, nil
}

func loadCA(path string) (*x509.CertPool, error) {
	b, err := readPEM(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
}

// index maps names to certificates; the first certificate in file order
// wins a name two of them share.
func (g *generation) index() {
	g.exact, g.wild = map[string]*tls.Certificate{}, map[string]*tls.Certificate{}
	for _, c := range g.certs {
		for _, n := range c.info.Names {
			m, key := g.exact, n
			if rest, ok := strings.CutPrefix(n, "*."); ok {
				m, key = g.wild, rest
			}
			if _, taken := m[key]; !taken {
				m[key] = c.cert
			}
		}
	}
}

// certificate picks by SNI: the exact name, then a wildcard for its parent
// (a TLS wildcard stands for one label, as clients check it), then the
// first certificate; none when strict. Then the config has no
// Certificates either, and crypto/tls refuses the handshake with the alert
// unrecognized_name (an error returned here would be internal_error).
func (g *generation) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := normalize(hello.ServerName)
	if c := g.exact[name]; c != nil {
		return c, nil
	}
	if _, parent, ok := strings.Cut(name, "."); ok {
		if c := g.wild[parent]; c != nil {
			return c, nil
		}
	}
	if g.strict {
		return nil, nil
	}
	return g.certs[0].cert, nil
}

// normalize lower-cases a DNS name and drops a trailing dot.
func normalize(n string) string {
	return strings.ToLower(strings.TrimSuffix(n, "."))
}
