package tlsedge

import (
	"net"
	"net/http"
	"strings"

	"sluice/internal/match"
)

// Redirect answers every request with 308 to the same host and URI over
// https on the port of tlsAddr (left out when it is 443). 308, not 301: a
// client repeats the method and body, so a POST stays a POST.
func Redirect(tlsAddr string) http.Handler {
	_, port, _ := net.SplitHostPort(tlsAddr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What the TLS listener would refuse (SPEC §11) is refused here
		// too, not redirected into a Location of its own making: CONNECT
		// (405 there too), a '#' in the target (sent on as %23), a Host
		// that names no host.
		if r.Method == http.MethodConnect {
			http.Error(w, "CONNECT: the gateway opens no tunnels", http.StatusMethodNotAllowed)
			return
		}
		if strings.IndexByte(r.RequestURI, '#') >= 0 {
			http.Error(w, "a fragment (#) in the request target", http.StatusBadRequest)
			return
		}
		if !match.PlainHost(r.Host) {
			http.Error(w, "the Host is no host name or address (or is missing): nothing to redirect to", http.StatusBadRequest)
			return
		}
		host := match.HostOnly(r.Host)
		if port != "" && port != "443" {
			host = net.JoinHostPort(host, port)
		} else if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		uri := r.URL.RequestURI()
		if !strings.HasPrefix(uri, "/") {
			// OPTIONS * (asterisk-form) names no resource to redirect to.
			http.Error(w, "only a path can be redirected to https", http.StatusBadRequest)
			return
		}
		w.Header()["Location"] = []string{"https://" + host + uri}
		w.WriteHeader(http.StatusPermanentRedirect)
	})
}
