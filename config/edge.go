package config

import (
	"path/filepath"
	"slices"
	"strings"
)

// TLS configures the HTTPS listener (docs/edge.md). It is off while Listen
// is "". Every field is read at start only: a reload that changes one warns.
type TLS struct {
	Listen       string        `yaml:"listen" json:"listen"`
	Certificates []Certificate `yaml:"certificates" json:"certificates"`
	// MinVersion is "1.2" or "1.3".
	MinVersion string `yaml:"minVersion" json:"minVersion"`
	// ClientCAFile, when set, makes clients present a certificate signed by
	// one of its CAs (mTLS).
	ClientCAFile string `yaml:"clientCAFile" json:"clientCAFile"`
	// RedirectHTTP makes the plain listener answer every request 308 to https.
	RedirectHTTP bool `yaml:"redirectHttp" json:"redirectHttp"`
	// StrictSNI refuses the handshake of a client whose SNI names no
	// certificate (or who sends none), and answers 421 to a request whose
	// Host is not the connection's SNI (docs/edge.md).
	StrictSNI bool `yaml:"strictSni" json:"strictSni"`
	// ClientCAFileLine is the line of clientCAFile in the file, for the
	// errors of a CA file that does not load.
	ClientCAFileLine int `yaml:"-" json:"-"`
}

// Certificate names a PEM certificate chain and its key; relative names are
// taken from the rules file's directory (see Config.File).
type Certificate struct {
	CertFile string `yaml:"certFile" json:"certFile"`
	KeyFile  string `yaml:"keyFile" json:"keyFile"`
	// Line is the pair's line in the file, for the errors of files that
	// do not load (read at start, by validate and at each renewal).
	Line int `yaml:"-" json:"-"`
}

// HTTP2 says where HTTP/2 is spoken.
type HTTP2 struct {
	// TLS offers h2 by ALPN on the TLS listener; nil (unset) is true.
	TLS *bool `yaml:"tls" json:"tls"`
	// H2C accepts HTTP/2 without TLS (prior knowledge) on listen.
	H2C bool `yaml:"h2c" json:"h2c"`
}

// OverTLS reports whether h2 is offered on the TLS listener (default true).
func (h HTTP2) OverTLS() bool { return h.TLS == nil || *h.TLS }

// Upstream protocols.
const (
	ProtocolHTTP1 = "http1"
	ProtocolH2C   = "h2c" // HTTP/2 with prior knowledge, no TLS (gRPC servers' plain port)
	ProtocolH2    = "h2"  // HTTP/2 over TLS
)

// Proto is the upstream's protocol, ProtocolHTTP1 when the file leaves it out.
func (u Upstream) Proto() string {
	if u.Protocol == "" {
		return ProtocolHTTP1
	}
	return u.Protocol
}

// DefaultTLSMinVersion is tls.minVersion when the file leaves it out.
const DefaultTLSMinVersion = "1.2"

// File resolves a file name given in the rules file: relative names are
// taken from the directory of the rules file, not the working directory.
func (c *Config) File(name string) string {
	if name == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(filepath.Dir(c.Path), name)
}

func (c *checker) applyEdgeDefaults() {
	cfg := c.cfg
	defaultTrue(&cfg.HTTP2.TLS)
	if !c.has("tls.minVersion") && cfg.TLS.Listen != "" {
		cfg.TLS.MinVersion = DefaultTLSMinVersion
	}
	for i := range cfg.Routes {
		for j, h := range cfg.Routes[i].Hosts {
			cfg.Routes[i].Hosts[j] = NormalizeHost(h)
		}
	}
	for i, h := range cfg.Admin.Hosts {
		cfg.Admin.Hosts[i] = NormalizeHost(h)
	}
}

// NormalizeHost is how a route's (or admin.hosts') host is compared: lower case, without a
// trailing dot.
func NormalizeHost(h string) string {
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// hostsKey tells routes on the same path apart by their hosts: the same
// pattern and method under different hosts are different routes.
func hostsKey(hosts []string) string {
	if len(hosts) == 0 {
		return ""
	}
	s := slices.Clone(hosts)
	slices.Sort(s)
	return " hosts=" + strings.Join(slices.Compact(s), ",")
}

// PatternKey is a route pattern with its parameter names erased: two
// patterns with the same key are the same route to chi ("/a/{id}" and
// "/a/{x}"), so only the first of them in the file can be served.
func PatternKey(pattern string) string {
	_, norm, _ := checkPattern(pattern)
	return norm
}
