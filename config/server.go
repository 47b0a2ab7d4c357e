package config

import (
	"math"
	"strings"
	"time"
)

// Server is how the traffic listeners read a client's request and what one
// client may hold on them (SPEC §11,
// docs/configuration.md#server-what-one-client-may-hold): how long it may
// take to send its request headers, to come back on an idle connection and
// to take the bytes of a response, and how many HTTP/2 streams one
// connection may have open. A gateway's own section: with a rulesSource it
// stays in the gateway's file.
type Server struct {
	// MergeSlashes makes "//" in a path one "/", for matching and
	// forwarding; nil (unset) is true (see MergesSlashes).
	MergeSlashes *bool `yaml:"mergeSlashes" json:"mergeSlashes"`
	// PathParameters says what a path holding a ';' (or an escaped one,
	// %3B) gets: refuse (unset) answers 400, keep matches and forwards it
	// as it is. Tomcat, Jetty, Spring and RESTEasy strip ";name=value"
	// from a path segment before routing, so /api;x/admin is /api/admin to
	// them while the routes, API groups and authority rules here see
	// another path (see PathParametersKept).
	PathParameters string `yaml:"pathParameters" json:"pathParameters,omitempty"`
	// EncodedSlashes says what a path holding an escaped slash or backslash
	// (%2F, %5C) gets: keep (unset, SPEC §11: "%2F is not a separator")
	// matches and forwards it as it is, refuse answers 400. WSGI servers,
	// gin, gorilla/mux and nginx's proxy_pass with a URI decode %2F before
	// routing, so /items%2F1 is /items/1 to them while the routes here see
	// another path (see EncodedSlashesRefused).
	EncodedSlashes string `yaml:"encodedSlashes" json:"encodedSlashes,omitempty"`
	// ReadHeaderTimeout bounds reading a request's header block (slowloris);
	// the -read-header-timeout flag overrides it. Read at start.
	ReadHeaderTimeout Duration `yaml:"readHeaderTimeout" json:"readHeaderTimeout"`
	// IdleTimeout closes a keep-alive connection (HTTP/1.1 or HTTP/2) that
	// carries no request for this long. Read at start.
	IdleTimeout Duration `yaml:"idleTimeout" json:"idleTimeout"`
	// SendTimeout is the longest a response waits for the client to take
	// bytes: past it the connection (HTTP/1.1) or the stream (HTTP/2) is
	// cut, the upstream call cancelled and the request's slots released. A
	// reload applies it to new connections and streams.
	SendTimeout Duration `yaml:"sendTimeout" json:"sendTimeout"`
	// TunnelIdleTimeout closes an upgraded connection (a WebSocket) that
	// carries no byte either way for this long. A reload applies it to the
	// tunnels opened after it.
	TunnelIdleTimeout Duration `yaml:"tunnelIdleTimeout" json:"tunnelIdleTimeout"`
	// Upgrades are the protocols a request may ask to switch to (Upgrade
	// tokens, compared without case): a token not listed is dropped, and a
	// request that lists none is sent as a plain one. Unset: websocket.
	// After an upstream's 101 the connection is a tunnel no rule sees, so
	// an upstream that answers 101 to any token (httpbin's /status/101)
	// and then reads HTTP would serve requests no rule counted; Envoy
	// upgrades only what its upgrade_configs name. A reload applies it.
	Upgrades []string `yaml:"upgrades" json:"upgrades"`
	// MaxConcurrentStreams is the number of HTTP/2 streams (requests) one
	// connection may have open at once. Read at start.
	MaxConcurrentStreams int `yaml:"maxConcurrentStreams" json:"maxConcurrentStreams"`
	// MaxConnections caps the client connections open on the traffic
	// listeners together; a connection past it is closed as it is
	// accepted. 0 (unset): half the process's open-file limit, so that
	// every client connection can still have its upstream connection (and
	// Redis its own) when clients take all they may. A reload applies it
	// to the connections accepted after it.
	MaxConnections int `yaml:"maxConnections" json:"maxConnections"`
	// MaxConnectionsPerIP caps the connections one peer address (the TCP
	// peer, never a header) may hold open, 0: none (nginx's limit_conn on
	// $binary_remote_addr). Behind a load balancer every client shares its
	// address: leave it 0 there. A reload applies it as MaxConnections.
	MaxConnectionsPerIP int `yaml:"maxConnectionsPerIP" json:"maxConnectionsPerIP"`
	// MaxBodyBytes caps every request body, 0: none; a route's own
	// maxBodyBytes overrides it. A body over it is answered 413 (SPEC §4).
	// A reload applies it.
	MaxBodyBytes int64 `yaml:"maxBodyBytes" json:"maxBodyBytes"`
}

// MergesSlashes reports whether "//" in a path is one "/" (default true).
func (s Server) MergesSlashes() bool { return s.MergeSlashes == nil || *s.MergeSlashes }

// The values of server.pathParameters.
const (
	PathParametersRefuse = "refuse"
	PathParametersKeep   = "keep"
)

// PathParametersKept reports whether a path holding ';' is served (keep)
// rather than refused (refuse, the default).
func (s Server) PathParametersKept() bool { return s.PathParameters == PathParametersKeep }

// The values of server.encodedSlashes.
const (
	EncodedSlashesKeep   = "keep"
	EncodedSlashesRefuse = "refuse"
)

// EncodedSlashesRefused reports whether a path holding %2F or %5C is
// answered 400 (refuse) rather than served as it is (keep, the default).
func (s Server) EncodedSlashesRefused() bool { return s.EncodedSlashes == EncodedSlashesRefuse }

// HasEncodedSlash reports a path holding an escaped '/' or '\' (%2F, %5C,
// in either case).
func HasEncodedSlash(p string) bool {
	for i := 0; i+2 < len(p); i++ {
		if e := p[i+1 : i+3]; p[i] == '%' && (strings.EqualFold(e, "2f") || strings.EqualFold(e, "5c")) {
			return true
		}
	}
	return false
}

// Defaults of the server section.
const (
	DefaultReadHeaderTimeout    = 10 * time.Second
	DefaultIdleTimeout          = 120 * time.Second
	DefaultSendTimeout          = 30 * time.Second
	DefaultTunnelIdleTimeout    = 5 * time.Minute // Envoy's stream_idle_timeout
	DefaultMaxConcurrentStreams = 100
)

// maxServerTimer bounds the server's timeouts: past an hour a setting is
// surely a typo, and a client would hold what the timeout guards for as long.
const maxServerTimer = time.Hour

func (c *checker) applyServerDefaults() {
	s := &c.cfg.Server
	defaultTrue(&s.MergeSlashes)
	if !c.has("server.readHeaderTimeout") {
		s.ReadHeaderTimeout = Duration(DefaultReadHeaderTimeout)
	}
	if !c.has("server.idleTimeout") {
		s.IdleTimeout = Duration(DefaultIdleTimeout)
	}
	if !c.has("server.sendTimeout") {
		s.SendTimeout = Duration(DefaultSendTimeout)
	}
	if !c.has("server.tunnelIdleTimeout") {
		s.TunnelIdleTimeout = Duration(DefaultTunnelIdleTimeout)
	}
	if !c.has("server.maxConcurrentStreams") {
		s.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if !c.has("server.upgrades") {
		s.Upgrades = []string{UpgradeWebSocket}
	}
}

// UpgradeWebSocket is the one Upgrade token allowed by default: a 101 to
// it must also carry the Sec-WebSocket-Accept its key asks for.
const UpgradeWebSocket = "websocket"

// validUpgradeToken reports an Upgrade token (RFC 9110 7.8: a token,
// optionally "/" and a version token).
func validUpgradeToken(t string) bool {
	name, version, slashed := strings.Cut(t, "/")
	return IsToken(name) && (!slashed || IsToken(version))
}

// validateServer checks the server section. A timeout of 0 is refused, not
// read as "none": a client that stops reading would hold its slots forever.
func (c *checker) validateServer() {
	s := c.cfg.Server
	for _, t := range []struct {
		path string
		d    Duration
	}{
		{"server.readHeaderTimeout", s.ReadHeaderTimeout},
		{"server.idleTimeout", s.IdleTimeout},
		{"server.sendTimeout", s.SendTimeout},
	} {
		if t.d <= 0 || t.d.D() > maxServerTimer {
			c.add(t.path, "must be > 0 and <= 1h, got %s", t.d)
		}
	}
	// A quiet WebSocket may rightly idle for long (a dashboard left open):
	// up to a day.
	if d := s.TunnelIdleTimeout; d <= 0 || d.D() > 24*time.Hour {
		c.add("server.tunnelIdleTimeout", "must be > 0 and <= 24h, got %s", d)
	}
	c.nonNegative("server.maxBodyBytes", float64(s.MaxBodyBytes))
	for _, n := range []struct {
		path string
		n    int
	}{{"server.maxConnections", s.MaxConnections}, {"server.maxConnectionsPerIP", s.MaxConnectionsPerIP}} {
		if n.n < 0 || n.n > math.MaxInt32 {
			c.add(n.path, "must be between 0 and %d, got %d", math.MaxInt32, n.n)
		}
	}
	for i, u := range s.Upgrades {
		switch {
		case !validUpgradeToken(u):
			c.add(idx("server.upgrades", i), "must be an Upgrade token (websocket, SPDY/3.1), got %q", u)
		case strings.EqualFold(u, "h2c"):
			c.add(idx("server.upgrades", i), "h2c cannot be forwarded: the upgraded connection's streams would pass no route or rule (http2.h2c serves h2c itself)")
		}
	}
	if c.has("server.pathParameters") {
		c.oneOf("server.pathParameters", s.PathParameters, PathParametersRefuse, PathParametersKeep)
	}
	if c.has("server.encodedSlashes") {
		c.oneOf("server.encodedSlashes", s.EncodedSlashes, EncodedSlashesKeep, EncodedSlashesRefuse)
	}
	if n := s.MaxConcurrentStreams; n < 1 || n > math.MaxInt32 {
		c.add("server.maxConcurrentStreams", "must be between 1 and %d (HTTP/2 streams one connection may have open), got %d",
			math.MaxInt32, n)
	}
}

// HasPathParameter reports a path holding a ';', raw or escaped (%3B): a
// path parameter to the servers that read ";name=value" in a segment.
func HasPathParameter(p string) bool {
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == ';':
			return true
		case p[i] == '%' && i+2 < len(p) && p[i+1] == '3' && (p[i+2] == 'b' || p[i+2] == 'B'):
			return true
		}
	}
	return false
}
