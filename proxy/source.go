package proxy

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"sluice/config"
	"sluice/internal/match"
)

// sources reads config.Sources from requests. It is built once per snapshot;
// reading a source allocates nothing unless the value must be unescaped.
type sources struct {
	trusted []netip.Prefix
}

func newSources(trusted []string) (*sources, error) {
	s := &sources{}
	for _, t := range trusted {
		// Canonical (masked, an IPv4-mapped prefix as its IPv4 one), as
		// the addresses it is compared with are.
		p, ok := match.ParsePrefix(t)
		if !ok {
			return nil, errors.New("proxy: trustedProxies: not a CIDR or an IP address: " + strconv.Quote(t))
		}
		s.trusted = append(s.trusted, p)
	}
	return s, nil
}

// maxValues is the most distinct values one source may give a request
// (SPEC §3 Sources: Several values); a request with more is 400.
const maxValues = 16

// valueSet is the distinct non-empty values of one source in one request,
// in the order they occur. It lives in the pooled exchange, so reading a
// source builds no slice; its strings alias the request unless they had to
// be unescaped.
type valueSet struct {
	v    [maxValues]string
	n    int
	over bool // more than maxValues distinct values occurred
	// one: the source must give one value (origin.from, hashOn). A cookie's
	// value is then read once, by its key (cookieKey: unquoted, decoded),
	// not every way the servers behind may read it (cookieValues): a JSON
	// cookie ({"a":1,"b":2}) or one escaped by JavaScript's escape() is one
	// value, not a 400. Two cookies of the name (decoded too: s%69d is sid)
	// with distinct keys still are.
	one bool
}

// add adds v unless it is empty or already there. Past maxValues distinct
// values it sets over and reports false: the reader stops.
func (vs *valueSet) add(v string) bool {
	if v == "" {
		return true
	}
	for _, x := range vs.v[:vs.n] {
		if x == v {
			return true
		}
	}
	if vs.n == len(vs.v) {
		vs.over = true
		return false
	}
	vs.v[vs.n] = v
	vs.n++
	return true
}

func (vs *valueSet) list() []string { return vs.v[:vs.n] }

// values reads the distinct non-empty values of src in r into vs (emptied
// first) and reports false when there are more than maxValues of them.
// v is the request's view (readTarget): query and path sources read it,
// not r.URL. params holds the path parameters (nil: none). A query
// parameter, a header or a cookie may occur more than once, and each
// occurrence is a value; a header's field lines are split into their list
// elements (headerValues); path, host and ip give at most one value.
func (s *sources) values(r *http.Request, v *view, params *chi.Context, src config.Source, vs *valueSet) bool {
	vs.n, vs.over = 0, false // the strings left behind are the pooled exchange's, zeroed with it
	switch src.Kind {
	case config.SourceHeader:
		// Names are stored canonical, so the map is read directly
		// (Header.Values would canonicalize again on every request).
		// X-Forwarded-For, -Host and -Proto are read as the gateway writes
		// them (forwardingHeader); other lines only where they are keyed
		// on (keyedOn).
		conn := connNamesOf(r.Header["Connection"])
		if !s.forwardingHeader(r, src.Name, vs) && s.keyedOn(r, src.Name, conn) {
			headerValues(r.Header[src.Name], fieldOf(src.Name), vs)
		}
		// The same name spelt with '_' for '-' (X_Tenant for X-Tenant) is
		// another field to net/http, and is forwarded, but CGI, WSGI,
		// PHP and Rack upstreams read both as HTTP_X_TENANT: it is an
		// occurrence of the header too, or it would carry a value past
		// the limits.
		for k, lines := range r.Header {
			if k != src.Name && sameCGIName(k, src.Name) && s.keyedOn(r, k, conn) {
				headerValues(lines, fieldOf(src.Name), vs)
			}
		}
	case config.SourceQuery:
		queryValues(v.query, src.Name, vs)
	case config.SourcePath:
		if params != nil {
			// The router matched the view's path, which is escaped: a
			// parameter is decoded as the upstream decodes its path
			// (/order/a%20b is order "a b"; unreserved escapes such as
			// %31 are decoded in the view already).
			if p := params.URLParam(src.Name); p != "" {
				vs.add(unescapedPath(p))
			}
		}
	case config.SourceCookie:
		if !listedIn(r.Header["Connection"], "Cookie") {
			cookieValues(r.Header["Cookie"], src.Name, vs)
		}
	case config.SourceHost:
		// one value: a Host holding a ',' (a list to an upstream reading
		// X-Forwarded-Host) was refused with 400 (readTarget)
		vs.add(match.Host(r.Host))
	case config.SourceIP:
		if v, ok := s.clientIP(r); ok {
			vs.add(v)
		}
	}
	return !vs.over
}

// keyedOn reports whether the client's header line k is a value of a
// header source: not one the forwarders drop for being named in the
// client's Connection, sent by an untrusted peer as X-Forwarded-*
// (spoofed), or spelt as a twin of a header they drop or write anew
// (twinOfDropped: X_Forwarded_For keyed as a victim's address charged the
// victim's budget). The forwarders pass on exactly these lines but those
// dropRequestHeader names (forwardHeader): a field addressed to the
// gateway itself (Proxy-Authorization, Forwarded) is keyed on though not
// passed on, the client's word to the gateway. The peer's trust is looked
// up only for a name it can change.
func (s *sources) keyedOn(r *http.Request, k string, conn connNames) bool {
	if conn.has(k) {
		return false
	}
	if strings.IndexByte(k, '_') < 0 && !strings.HasPrefix(k, "X-Forwarded-") {
		return true // the common line: no peer to look up
	}
	trusted := s.peerTrusted(r)
	return !spoofed(k, trusted) && !twinOfDropped(k, trusted)
}

// forwardingHeader reads the forwarding headers that both forwarders
// write anew (outgoing.go) as the upstream gets them, not as the client
// sent them, and reports false for any other name: X-Forwarded-Host is
// the client's Host, X-Forwarded-Proto how it came (as a trusted proxy
// says, if one does: forwardedProto), and X-Forwarded-For
// what forwardedFor writes: the peer's address, after the chain a trusted
// proxy sent. A client's own X-Forwarded-Host
// or X-Forwarded-For is never forwarded: keyed on, it would let any
// invented value past a limit on what the upstream sees.
func (s *sources) forwardingHeader(r *http.Request, name string, vs *valueSet) bool {
	switch name {
	case "X-Forwarded-Host":
		vs.add(r.Host) // as sent: no list (a Host holding ',' is 400, readTarget)
	case "X-Forwarded-Proto":
		vs.add(s.forwardedProto(r))
	case "X-Forwarded-For":
		if chain, ip, ok := s.forwardedFor(r); ok {
			headerValues(chain, fieldList, vs)
			vs.add(ip)
		}
	default:
		return false
	}
	return true
}

// clientIP is the ip source's value: the client (client) as a canonical
// address (canonicalAddr), so that one client is one key; a peer that is
// not an address (a Unix socket's) as the server gave it.
func (s *sources) clientIP(r *http.Request) (string, bool) {
	a, raw := s.client(r)
	if !a.IsValid() {
		return raw, raw != ""
	}
	return match.AddrString(a, raw), true
}

// client is the TCP peer, unless the peer is a trusted proxy: then the
// right-most X-Forwarded-For address that is not itself trusted. A header
// sent by an untrusted peer is never read, so it cannot buy another
// client. raw is the client as written (the peer without its port, or the
// X-Forwarded-For element), a it read as a canonical address
// (match.Addr), the zero Addr when raw is not one (a Unix socket's peer).
// It allocates nothing: the ip source, the authority rules and the
// forwarded-for header all read the client here.
func (s *sources) client(r *http.Request) (a netip.Addr, raw string) {
	raw = match.HostOnly(r.RemoteAddr)
	a, ok := match.Addr(raw)
	if !ok || !s.trustedAddr(a) {
		return a, raw
	}
	xff := r.Header["X-Forwarded-For"]
	for i := len(xff) - 1; i >= 0; i-- {
		line := xff[i]
		for line != "" {
			var part string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				part, line = line[j+1:], line[:j]
			} else {
				part, line = line, ""
			}
			// Some proxies write the client's port too ("1.2.3.4:5678",
			// "[::1]:443"); the address alone is the client.
			part = match.HostOnly(strings.TrimSpace(part))
			if part == "" {
				continue
			}
			hop, ok := match.Addr(part)
			if !ok {
				// Garbage in the header: stop at the last hop we can vouch for.
				return a, raw
			}
			a, raw = hop, part
			if !s.trustedAddr(hop) {
				return a, raw
			}
		}
	}
	return a, raw
}

// canonicalAddr parses an address written without a port (match.Addr) and
// also returns it written in the one form that makes one client one key
// (match.AddrString); ok is false when s is not an address.
func canonicalAddr(s string) (a netip.Addr, canon string, ok bool) {
	if a, ok = match.Addr(s); !ok {
		return netip.Addr{}, "", false
	}
	return a, match.AddrString(a, s), true
}

// trustedAddr reports whether a canonical address is in trustedProxies.
func (s *sources) trustedAddr(a netip.Addr) bool {
	for _, p := range s.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerTrusted reports whether the request came from a trusted proxy.
func (s *sources) peerTrusted(r *http.Request) bool {
	if len(s.trusted) == 0 {
		return false
	}
	a, ok := match.Addr(match.HostOnly(r.RemoteAddr)) // not its canonical text: no allocation
	return ok && s.trustedAddr(a)
}

// queryValues adds the values of key in a raw query without building
// url.Values (which allocates a map per request). A parameter's name is
// read decoded, and as PHP mangles it (formName): ?user.id= is user_id to
// $_GET.
func queryValues(raw, key string, vs *valueSet) {
	for raw != "" {
		var kv string
		if i := strings.IndexByte(raw, '&'); i >= 0 {
			kv, raw = raw[:i], raw[i+1:]
		} else {
			kv, raw = raw, ""
		}
		k, v, _ := strings.Cut(kv, "=")
		if !formName(k, key, !vs.one) {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			v = unescaped(v)
		}
		if !vs.add(v) {
			return
		}
	}
}

func unescaped(s string) string {
	u, err := url.QueryUnescape(s)
	if err != nil {
		return s
	}
	return u
}

// How a header's field lines give values (fieldOf).
const (
	fieldList        = iota // comma-separated lists (RFC 9110 §5.3)
	fieldSingle             // one value a line, commas and all
	fieldCredentials        // one a line, read as credentials (match.Credentials)
)

// fieldOf says how a header's field lines give values: as lists, as every
// field does unless it is one of the singletons whose values hold commas
// of their own (credentials, the user agent, cookies: read them with
// cookie:, the referrer and dates). Credentials are also keyed as servers
// read them: the scheme in any case, any run of spaces after it, Basic's
// base64 as lenient decoders take it.
func fieldOf(name string) int {
	switch name {
	case "Authorization", "Proxy-Authorization":
		return fieldCredentials
	case "User-Agent", "Cookie", "Referer", "Date", "If-Modified-Since", "If-Unmodified-Since", "If-Range":
		return fieldSingle
	}
	return fieldList
}

// headerValues adds the values of a header's field lines. A list field's
// line holds one value per comma outside a quoted string, spaces around it
// trimmed: "X-Key: a, b" is the values a and b, exactly as two lines "a"
// and "b" are (RFC 9110 lets any hop join or split them that way).
func headerValues(lines []string, field int, vs *valueSet) {
	for _, line := range lines {
		switch field {
		case fieldCredentials:
			var buf [2]string
			for _, v := range match.Credentials(buf[:0], trimOWS(line)) {
				if !vs.add(v) {
					return
				}
			}
			continue
		case fieldSingle:
			// Trimmed: an HTTP/1 server trims the line, but an h2 field
			// may keep spaces an upstream over HTTP/1 never sees.
			if !vs.add(trimOWS(line)) {
				return
			}
			continue
		}
		if strings.IndexByte(line, ',') < 0 {
			if !vs.add(trimOWS(line)) { // one element: the common case
				return
			}
			continue
		}
		for line != "" {
			var part string
			part, line = nextListElement(line)
			if !vs.add(trimOWS(part)) {
				return
			}
		}
	}
}

// sameCGIName reports whether two header names are one CGI meta-variable
// (RFC 3875 4.1.18: HTTP_ and the name upper-cased, '-' written '_'):
// equal but for ASCII case and '_' for '-'. Only a name holding a '_' can
// be such a twin of another: net/http merges the spellings that differ in
// case alone.
func sameCGIName(a, b string) bool {
	if len(a) != len(b) || strings.IndexByte(a, '_') < 0 && strings.IndexByte(b, '_') < 0 {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == '_' {
			x = '-'
		}
		if y == '_' {
			y = '-'
		}
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// trimOWS trims the optional white space (spaces and tabs) around a list
// element, without strings.Trim's per-call cutset.
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// nextListElement splits a list field's line at its first comma outside a
// double-quoted string (where a backslash escapes the next character).
func nextListElement(line string) (elem, rest string) {
	quoted := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			return line[:i], line[i+1:]
		}
	}
	return line, ""
}
