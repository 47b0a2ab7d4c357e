package config

import (
	"net"
	"slices"
	"strings"
)

// validateEdge checks the edge settings: the TLS listener, HTTP/2 and the
// routes' hosts (docs/edge.md) and admin.hosts.
func (c *checker) validateEdge() {
	cfg := c.cfg
	t := cfg.TLS
	if t.Listen == "" {
		for _, f := range []struct {
			path string
			set  bool
		}{
			{"tls.certificates", len(t.Certificates) > 0},
			{"tls.clientCAFile", t.ClientCAFile != ""},
			{"tls.redirectHttp", t.RedirectHTTP},
			{"tls.strictSni", t.StrictSNI},
		} {
			if f.set {
				c.add(f.path, "needs tls.listen (the HTTPS listener's address, like \":8443\")")
			}
		}
	} else {
		c.listenAddr("tls.listen", t.Listen, false)
		if len(t.Certificates) == 0 && !c.bad["tls.certificates"] {
			c.add("tls.certificates", "at least one certificate is required with tls.listen ({certFile, keyFile})")
		}
		if t.RedirectHTTP && cfg.Listen == "" {
			c.add("tls.redirectHttp", "needs listen (the plain listener that answers with the redirect)")
		}
	}
	for i, ct := range t.Certificates {
		p := idx("tls.certificates", i)
		if ct.CertFile == "" {
			c.add(p+".certFile", "is required (a PEM certificate chain)")
		}
		if ct.KeyFile == "" {
			c.add(p+".keyFile", "is required (the PEM private key of certFile)")
		}
	}
	if t.Listen != "" || c.has("tls.minVersion") {
		c.oneOf("tls.minVersion", t.MinVersion, "1.2", "1.3")
	}
	if cfg.HTTP2.H2C && cfg.Listen == "" {
		c.add("http2.h2c", "needs listen (h2c is HTTP/2 on the plain listener)")
	}
	names := make([]string, 0, len(cfg.Upstreams))
	for n := range cfg.Upstreams {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		u, p := cfg.Upstreams[n], "upstreams."+n
		if !c.oneOf(p+".protocol", u.Proto(), ProtocolHTTP1, ProtocolH2C, ProtocolH2) || u.Proto() == ProtocolHTTP1 {
			continue
		}
		want := "http"
		if u.Protocol == ProtocolH2 {
			want = "https"
		}
		for i, t := range u.Targets {
			if scheme, _, ok := strings.Cut(t.URL, "://"); ok && scheme != want && checkTarget(t.URL) == "" {
				c.add(idx(p+".targets", i), "must be an %s:// URL with protocol %s, got %s", want, u.Protocol, quote(t.URL))
			}
		}
	}
	for i, r := range cfg.Routes {
		c.hostList(idx("routes", i)+".hosts", r.Hosts)
	}
	c.hostList("admin.hosts", cfg.Admin.Hosts)
}

// hostList checks a list of host names (routes[].hosts, admin.hosts), each
// already normalized: each a name checkHost accepts, each once.
func (c *checker) hostList(path string, hosts []string) {
	seen := map[string]int{}
	for j, h := range hosts {
		p := idx(path, j)
		if msg := checkHost(h); msg != "" {
			c.add(p, "%s", msg)
			continue
		}
		if first, dup := seen[h]; dup {
			c.add(p, "duplicate host %s (also hosts[%d])", quote(h), first)
		}
		seen[h] = j
	}
}

// checkHost checks a route's or admin.hosts' host (already normalized): a DNS name, or
// "*." and a DNS name for any one or more labels before it.
func checkHost(h string) string {
	const forms = " (a name like shop.example.com, or *.example.com)"
	if h == "" {
		return "must not be empty" + forms
	}
	if scheme, rest, ok := strings.Cut(h, "://"); ok {
		name := strings.SplitN(rest, "/", 2)[0]
		if _, after, found := strings.Cut(name, "@"); found {
			name = after
		}
		if host, _, err := net.SplitHostPort(name); err == nil {
			name = host
		}
		return "must be a host name, not a URL: write " + quote(name) + " (without " + scheme + "://)"
	}
	name := strings.TrimPrefix(h, "*.")
	if strings.Contains(name, "*") {
		return "a wildcard must be the first label, as in *.example.com, got " + quote(h)
	}
	if host, _, err := net.SplitHostPort(h); err == nil {
		return "must not have a port (the request's port is ignored when matching): write " + quote(host)
	}
	switch dnsName(name, true) {
	case nameTooLong:
		return "is longer than 253 characters"
	case nameLabelSize:
		return "must be dot-separated labels of 1 to 63 characters" + forms + ", got " + quote(h)
	case nameLabelChars:
		return "may hold only letters, digits, '-' and '_' between dots" + forms + ", got " + quote(h)
	case nameLabelDash:
		return "a label must not start or end with '-'" + forms + ", got " + quote(h)
	}
	return ""
}
