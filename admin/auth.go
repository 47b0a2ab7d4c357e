package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// requireToken guards writes: a request whose Origin names another host is
// refused (403) so a web page cannot drive the local listener through the
// operator's browser; when a token is configured a request without the right
// bearer token is refused (401); without a token, writes must name a loopback
// Host (403 otherwise), which defeats DNS rebinding and makes a listener
// opened to the network without a token read-only.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := s.token.Load() // one token for the whole check, even across a SetToken
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || u.Host != r.Host {
				writeError(w, http.StatusForbidden, "admin: cross-origin write refused")
				return
			}
		}
		if want.token == "" && !loopbackHost(r.Host) {
			writeError(w, http.StatusForbidden, "admin: writes without an admin token are accepted only on localhost; set admin.token (or SLUICE_ADMIN_TOKEN)")
			return
		}
		if want.token != "" {
			got, ok := bearer(r.Header.Get("Authorization"))
			// Hashing first makes the comparison constant-time in the token's length too.
			sum := sha256.Sum256([]byte(got))
			if !ok || subtle.ConstantTimeCompare(sum[:], want.sum[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
				writeError(w, http.StatusUnauthorized, "admin: this write needs Authorization: Bearer <admin token>")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this machine's loopback.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func bearer(h string) (string, bool) {
	const prefix = "bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(h[len(prefix):]), true
}
