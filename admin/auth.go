package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// requireToken guards writes: a request whose Origin names another host is
// refused (403) so a web page cannot drive the local listener through the
// operator's browser, and when a token is configured a request without the
// right bearer token is refused (401).
func (s *Server) requireToken(next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(s.opts.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || u.Host != r.Host {
				writeError(w, http.StatusForbidden, "admin: cross-origin write refused")
				return
			}
		}
		if s.opts.Token != "" {
			got, ok := bearer(r.Header.Get("Authorization"))
			// Hashing first makes the comparison constant-time in the token's length too.
			sum := sha256.Sum256([]byte(got))
			if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
				writeError(w, http.StatusUnauthorized, "admin: this write needs Authorization: Bearer <admin token>")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func bearer(h string) (string, bool) {
	const prefix = "bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(h[len(prefix):]), true
}
