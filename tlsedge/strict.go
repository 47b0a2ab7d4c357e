package tlsedge

import (
	"net/http"

	"sluice/internal/match"
)

// StrictHost answers 421 Misdirected Request to a request over TLS whose
// Host (HTTP/2's :authority) names another host than the connection's SNI
// (tls.strictSni), and passes the rest to next, which neither routes,
// limits nor counts the refused one. Without it a connection made for
// shop.example.com may ask for api.example.com (domain fronting): a
// certificate's client checks, a CDN's or a WAF's decisions made by SNI,
// do not hold for the request. 421 is what RFC 9110 15.5.20 names for it,
// and what a browser that coalesced two hosts' requests on one HTTP/2
// connection retries on a connection of the Host's own. Names compare as
// the routes' hosts do (match.Host: no port, case or trailing dot); the
// handshake has refused a client with no SNI (Options.StrictSNI).
func StrictHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && match.Host(r.Host) != normalize(r.TLS.ServerName) {
			http.Error(w, "misdirected request: the Host is not the TLS server name (SNI) of the connection", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
