package proxy

import (
	"net/http"
	"slices"
	"strings"
)

// dropH2CUpgrade turns an HTTP/1.1 request asking to upgrade to h2c
// (curl --http2 on an http:// URL) into a plain one. Forwarded, the upgrade
// would hand the client's connection to an upstream that speaks h2c, and
// every later stream on it would pass without a route or a rule. sluice
// answers it over HTTP/1.1, as RFC 9113 lets a server do; prior-knowledge
// h2c is served by the listener itself (http2.h2c).
func dropH2CUpgrade(r *http.Request) {
	for _, v := range r.Header["Upgrade"] {
		if containsFold(v, "h2c") {
			dropUpgrade(r, "Http2-Settings")
			return
		}
	}
}

// dropUpgrade makes r a request that asks for no protocol switch: the
// Upgrade field, the fields named in also and their Connection tokens go,
// as RFC 9110 7.8 lets a server ignore an Upgrade. The gateway does so for
// an upgrade to h2c (dropH2CUpgrade) and for any upgrade routed to an
// upstream that speaks HTTP/2, which has no Upgrade (route.forward): Go's
// HTTP/2 client refused such a request before sending it, and the refusal
// was charged to the target as its failure.
func dropUpgrade(r *http.Request, also ...string) {
	r.Header.Del("Upgrade")
	for _, k := range also {
		r.Header.Del(k)
	}
	var keep []string
	for _, c := range r.Header["Connection"] {
		for _, tok := range strings.Split(c, ",") {
			switch tok = strings.TrimSpace(tok); {
			case strings.EqualFold(tok, "upgrade"), tok == "":
			case slices.ContainsFunc(also, func(k string) bool { return strings.EqualFold(tok, k) }):
			default:
				keep = append(keep, tok)
			}
		}
	}
	if len(keep) > 0 {
		r.Header["Connection"] = []string{strings.Join(keep, ", ")}
	} else {
		r.Header.Del("Connection")
	}
}
