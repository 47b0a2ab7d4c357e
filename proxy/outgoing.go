package proxy

import (
	"net/http"
	"net/url"
	"strings"

	"sluice/config"
	"sluice/internal/match"
)

// The outgoing request, written here once for both transports: each
// applies these to its own request object (the fast one to a
// fasthttp.Request, the standard one in ReverseProxy's Rewrite), so the
// upstream gets the same request-target, Host, X-Forwarded-* and headers
// whichever path carried it (docs/forwarding.md#same-semantics-on-both-paths).

// forwardHeader reports whether the client's header k of r is passed on
// by rt: not one dropRequestHeader names, a line the header source keys on
// (keyedOn: not named in the client's Connection values conn, not an
// X-Forwarded-* header of an untrusted peer, not a CGI twin of either),
// and not the origin header that origin.strip removes (nor its CGI twin).
func (rt *route) forwardHeader(r *http.Request, k string, conn connNames) bool {
	return !dropRequestHeader(k) && rt.snap.sources.keyedOn(r, k, conn) && k != rt.stripOrigin && !rt.strippedTwin(k)
}

// spoofed reports an inbound X-Forwarded-* header (canonical name k) that
// only a trusted proxy may pass on: X-Forwarded-Port, -Prefix, -Ssl, ...
// tell a Spring, ASP.NET or Rails upstream how to build its own URLs, and
// from any other peer they are the client's invention, as Traefik drops
// them. (-For, -Host and -Proto are written anew for every peer.)
func spoofed(k string, trusted bool) bool {
	return !trusted && strings.HasPrefix(k, "X-Forwarded-")
}

// twinOfDropped reports a name spelt with '_' that a CGI, WSGI, PHP or
// Rack upstream reads as a header the gateway drops (spoofed, unless
// trusted) or writes anew (X_Forwarded_For is HTTP_X_FORWARDED_FOR to
// them, as X-Forwarded-For is): forwarded, it would stand for that header,
// the client's own X-Forwarded-For. It allocates nothing: the header
// source asks it of every line.
func twinOfDropped(k string, trusted bool) bool {
	if strings.IndexByte(k, '_') < 0 {
		return false
	}
	if !trusted && len(k) >= len("X-Forwarded-") && sameCGIName(k[:len("X-Forwarded-")], "X-Forwarded-") {
		return true
	}
	var buf [32]byte // longer than every name dropRequestHeader drops
	if len(k) > len(buf) {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_':
			c = '-'
		case i == 0 || buf[i-1] == '-':
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return dropRequestHeader(string(buf[:len(k)]))
}

// strippedTwin reports a name spelt with '_' that such an upstream reads
// as the origin header origin.strip removes (X_App for X-App).
func (rt *route) strippedTwin(k string) bool {
	return rt.stripOrigin != "" && strings.IndexByte(k, '_') >= 0 && sameCGIName(k, rt.stripOrigin)
}

// forwardedFor is what X-Forwarded-For says, as
// ProxyRequest.SetXForwarded writes it: the inbound chain (kept only when
// the TCP peer is a trusted proxy), then the peer's address ip; joined
// with ", ". ok is false when the peer has no address: none is sent.
func (s *sources) forwardedFor(r *http.Request) (chain []string, ip string, ok bool) {
	// The peer as the ip source reads it (canonicalAddr), not a second
	// parse of RemoteAddr: the address the limits keyed on is the one sent.
	_, ip, ok = canonicalAddr(match.HostOnly(r.RemoteAddr))
	if !ok {
		return nil, "", false
	}
	if s.peerTrusted(r) {
		chain = r.Header["X-Forwarded-For"]
	}
	return chain, ip, true
}

// forwardedProto is X-Forwarded-Proto: https for a request that came over
// TLS (SPEC §8, whatever a peer says: nginx's $scheme); over plain HTTP,
// when the peer is a trusted proxy that says so in one value, how the
// client reached that proxy (a load balancer that ends TLS before sluice),
// as Traefik keeps it from its trusted IPs, else http. Anything else from
// any peer is replaced. X-Forwarded-Host is the client's Host.
func (s *sources) forwardedProto(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	if v := r.Header["X-Forwarded-Proto"]; len(v) == 1 && s.peerTrusted(r) {
		switch {
		case strings.EqualFold(v[0], "https"):
			return "https"
		case strings.EqualFold(v[0], "http"):
			return "http"
		}
	}
	return "http"
}

// appendUpstreamTarget appends the request-target that the upstream
// receives from either forwarder, and returns the length of its path part:
// the view's path with the route's prefix stripped, joined to the target's
// own path as httputil.ProxyRequest.SetURL joins them (on escaped paths,
// one slash between), then the target's query before the view's. It
// allocates nothing for a target whose path needs no escaping.
func appendUpstreamTarget(dst []byte, t *url.URL, v *view, strip string) ([]byte, int) {
	start := len(dst)
	p := v.path
	if strip != "" {
		p = stripPrefix(p, strip)
	}
	if tp := t.EscapedPath(); tp != "" {
		switch aslash := strings.HasSuffix(tp, "/"); {
		case aslash && strings.HasPrefix(p, "/"):
			dst = append(dst, tp...)
			p = p[1:]
		case !aslash && !strings.HasPrefix(p, "/"):
			dst = append(append(dst, tp...), '/')
		default:
			dst = append(dst, tp...)
		}
	}
	dst = append(dst, p...)
	n := len(dst) - start
	if n == 0 {
		dst, n = append(dst, '/'), 1
	}
	switch tq := t.RawQuery; {
	case tq != "" && v.query != "":
		dst = append(append(append(append(dst, '?'), tq...), '&'), v.query...)
	case tq != "":
		dst = append(append(dst, '?'), tq...)
	case v.query != "":
		dst = append(append(dst, '?'), v.query...)
	}
	return dst, n
}

// dropRequestHeader reports the inbound headers no upstream gets as sent:
// the hop-by-hop ones (RFC 9110 7.6.1; TE: trailers and an upgrade's
// Connection and Upgrade are set anew), the forwarding headers set by
// forwardedFor and forwardedProto, and the framing each transport's client
// writes anew (Content-Length comes from the body). ReverseProxy removes
// the same before the standard Rewrite (forward_parity_test.go checks
// that both send the same headers).
func dropRequestHeader(k string) bool {
	switch k {
	case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
		"Content-Length", "Host":
		return true
	}
	return config.HopByHop(k)
}

func stripPrefix(p, prefix string) string {
	if !strings.HasPrefix(p, prefix) {
		return p
	}
	p = p[len(prefix):]
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p
}
