package proxy

import (
	"crypto/sha1"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"

	"sluice/config"
)

// dropH2CUpgrade turns an HTTP/1.1 request asking to upgrade to h2c
// (curl --http2 on an http:// URL) into a plain one. Forwarded, the upgrade
// would hand the client's connection to an upstream that speaks h2c, and
// every later stream on it would pass without a route or a rule. sluice
// answers it over HTTP/1.1, as RFC 9113 lets a server do; prior-knowledge
// h2c is served by the listener itself (http2.h2c). The field is read as
// a token list, as keepUpgrades and webSocketAccepted read it (a substring
// took "Upgrade: not-h2c, websocket" for h2c and dropped the WebSocket).
func dropH2CUpgrade(r *http.Request) {
	if listedIn(r.Header["Upgrade"], "h2c") {
		dropUpgrade(r, "Http2-Settings")
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

// keepUpgrades leaves in r's Upgrade field the tokens of allowed
// (server.upgrades) and reports whether any is left: a request asking
// only for others is sent as a plain one (dropUpgrade). An upstream that
// answered 101 to any token (httpbin's /status/101) and went on reading
// HTTP served, on the tunnel, requests no route or rule saw.
func keepUpgrades(r *http.Request, allowed []string) bool {
	var keep []string
	dropped := false
	for tok := range listTokens(r.Header["Upgrade"]) {
		// ASCII case only, as listedIn and net/http compare tokens:
		// strings.EqualFold took "webſocket" (a long s) for websocket, and
		// webSocketAccepted did not, so a 101 to it tunnelled unjudged.
		if slices.ContainsFunc(allowed, func(a string) bool { return equalFoldASCII(a, tok) }) {
			keep = append(keep, tok)
		} else {
			dropped = true
		}
	}
	if dropped && len(keep) > 0 {
		r.Header["Upgrade"] = []string{strings.Join(keep, ", ")}
	}
	return len(keep) > 0
}

// webSocketAccepted reports whether a 101 answering req accepts its
// WebSocket handshake as RFC 6455 4.2.2 has a server do: with
// Sec-WebSocket-Accept, the SHA-1 of the client's key and the protocol's
// GUID. A browser fails a WebSocket without it; the gateway, which would
// otherwise open a tunnel no rule sees to an upstream that answers 101
// without having spoken WebSocket at all, answers 502. A request that did
// not ask for websocket (a token of its Upgrade field, as keepUpgrades
// reads them) is not judged here.
func webSocketAccepted(req *http.Request, resp *http.Response) bool {
	if !listedIn(req.Header["Upgrade"], config.UpgradeWebSocket) {
		return true
	}
	sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return resp.Header.Get("Sec-WebSocket-Accept") == base64.StdEncoding.EncodeToString(sum[:])
}
