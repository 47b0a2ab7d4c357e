package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// allowedHosts is the admin.hosts in force: names, and "*.suffix" wildcards
// kept as ".suffix", each lower case without a trailing dot.
type allowedHosts struct {
	names []string
}

// newAllowedHosts takes admin.hosts as config normalizes them.
func newAllowedHosts(hosts []string) *allowedHosts {
	a := &allowedHosts{}
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		if h != "" {
			a.names = append(a.names, strings.TrimPrefix(h, "*"))
		}
	}
	return a
}

// SetHosts puts a new admin.hosts in force: from the next request on, a
// Host that is neither an IP literal, localhost nor one of hosts is
// refused (403). Names are compared without case and trailing dot;
// "*.example.com" admits every name under example.com. Safe for concurrent
// use.
func (s *Server) SetHosts(hosts []string) {
	s.hosts.Store(newAllowedHosts(hosts))
}

// checkHost refuses (403) every request whose Host is not an IP literal,
// localhost or one of admin.hosts, reads included: a page whose name was
// rebound to this listener's address (DNS rebinding) sends its own name,
// so it can read nothing, not even the metrics. A request without Host
// (HTTP/1.0) names none of them and is refused too, as SPEC §9 says: a
// probe that sends no Host is told so in the 403.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "" {
			writeError(w, http.StatusForbidden, "admin: a request without Host is refused; send Host: 127.0.0.1 (or a name in admin.hosts)")
			return
		}
		if !s.hosts.Load().allows(r.Host) {
			writeError(w, http.StatusForbidden, "admin: Host "+strconv.Quote(r.Host)+
				" is not an IP address, localhost or one of admin.hosts; add the name to admin.hosts to use it")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allows reports whether a Host header (port dropped, case and trailing
// dot ignored) is an IP literal, localhost or one of the names.
func (a *allowedHosts) allows(hostport string) bool {
	host := hostName(hostport)
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	if host == "localhost" {
		return true
	}
	for _, n := range a.names {
		if host == n || n[0] == '.' && len(host) > len(n) && strings.HasSuffix(host, n) {
			return true
		}
	}
	return false
}

// hostName is a Host header's host: port and IPv6 brackets dropped, lower
// case, without a trailing dot.
func hostName(hostport string) string {
	host := hostport
	if _, err := netip.ParseAddr(host); err != nil { // not an unbracketed IPv6 literal
		if h, _, err := net.SplitHostPort(hostport); err == nil {
			host = h
		}
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// loopbackPeer reports whether the TCP peer (r.RemoteAddr, never a header)
// is on a loopback address: 127.0.0.0/8, ::1, or IPv4-mapped loopback.
func loopbackPeer(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// requireToken guards writes and the profiler: a request whose Origin names
// another host, or that a browser says came from another site's page
// (Sec-Fetch-Site), is refused (403) so a web page cannot drive the local
// listener through the operator's browser; when a token is configured a
// request without the right bearer token is refused with noToken (401 for
// writes, 403 for the profiler as SPEC section 5 says); without a token,
// only a peer on a loopback address may pass (403 otherwise), so a listener
// opened to the network without a token is read-only. The peer is the TCP
// connection's, never a header (Host, X-Forwarded-For) the client chose.
func (s *Server) requireToken(noToken int) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler { return s.tokenGuard(next, noToken) }
}

func (s *Server) tokenGuard(next http.Handler, noToken int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, msg := s.refusal(r, noToken); code != 0 {
			if msg == needToken {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
			}
			writeError(w, code, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

const needToken = "admin: this request needs Authorization: Bearer <admin token>"

// mayWrite reports whether r would pass the guard of writes: a read that
// shows what only a writer may see (the values of a credential param
// rule, /api/params) asks it, and refuses nothing.
func (s *Server) mayWrite(r *http.Request) bool {
	code, _ := s.refusal(r, http.StatusUnauthorized)
	return code == 0
}

// refusal is requireToken's verdict on r: 0 to let it pass, else the
// status and message it is refused with.
func (s *Server) refusal(r *http.Request, noToken int) (int, string) {
	want := s.token.Load() // one token for the whole check, even across a SetToken
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return http.StatusForbidden, "admin: cross-origin write refused"
		}
	}
	// A GET from another site's page (an <img> starting a profile)
	// carries no Origin; browsers say where it came from in
	// Sec-Fetch-Site. Scripts (curl, go tool pprof) send none.
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return http.StatusForbidden, "admin: a request from another site's page refused"
	}
	// Browsers older than Sec-Fetch-Site (Safari before 16.4, Firefox
	// before 90) still name the page in Referer, unless its policy hides
	// it: that much more is refused.
	if ref := r.Header.Get("Referer"); ref != "" {
		if u, err := url.Parse(ref); err != nil || u.Host != r.Host {
			return http.StatusForbidden, "admin: a request from another site's page refused"
		}
	}
	if want.token == "" && !loopbackPeer(r) {
		return http.StatusForbidden, "admin: without an admin token, writes and the profiler are accepted only from this machine (a loopback peer); set admin.token (or SLUICE_ADMIN_TOKEN)"
	}
	if want.token != "" {
		got, ok := bearer(r.Header.Get("Authorization"))
		// Hashing first makes the comparison constant-time in the token's length too.
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want.sum[:]) != 1 {
			return noToken, needToken
		}
	}
	return 0, ""
}

func bearer(h string) (string, bool) {
	const prefix = "bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(h[len(prefix):]), true
}
