package proxy

import (
	"net/http"
	"strings"
)

// dropH2CUpgrade turns an HTTP/1.1 request asking to upgrade to h2c
// (curl --http2 on an http:// URL) into a plain one. Forwarded, the upgrade
// would hand the client's connection to an upstream that speaks h2c, and
// every later stream on it would pass without a route or a rule. sluice
// answers it over HTTP/1.1, as RFC 9113 lets a server do; prior-knowledge
// h2c is served by the listener itself (http2.h2c).
func dropH2CUpgrade(r *http.Request) {
	up := r.Header["Upgrade"]
	if len(up) == 0 {
		return
	}
	for _, v := range up {
		if containsFold(v, "h2c") {
			r.Header.Del("Upgrade")
			r.Header.Del("Http2-Settings")
			var keep []string
			for _, c := range r.Header["Connection"] {
				for _, tok := range strings.Split(c, ",") {
					switch tok = strings.TrimSpace(tok); {
					case strings.EqualFold(tok, "upgrade"), strings.EqualFold(tok, "http2-settings"), tok == "":
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
			return
		}
	}
}
