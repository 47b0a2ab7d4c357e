package proxy

import (
	"fmt"
	"net/http"
	"strings"
)

// forwarder sends one request to the route's upstream within the route's
// timeout and writes the answer to the client through ex, so that ex.status
// and ex.failed say what happened: a transport failure or timeout sets
// ex.failed and answers 502/504 (nothing when the client went away); a
// failure after the status was sent aborts the response with
// http.ErrAbortHandler, as httputil.ReverseProxy does.
type forwarder interface {
	forward(ex *exchange, r *http.Request)
	name() string
}

// forwarderMode is a route's `forwarder:` setting.
type forwarderMode uint8

const (
	// modeAuto sends ordinary requests the fast path and the ones it cannot
	// carry as well (upgrades, streamed or large request bodies, clients
	// asking for an event stream or for trailers, and every request of a
	// route whose calls hold a slot in flight: slotRules) the standard
	// path.
	modeAuto forwarderMode = iota
	// modeStandard sends everything through httputil.ReverseProxy.
	modeStandard
	// modeFast sends everything the fast path can carry at all the fast
	// path; only what it cannot (see mustStandard) goes the standard path.
	modeFast
)

// CheckForwarder reports whether s is a forwarder override that New
// accepts as Deps.Forwarder: "" (none), auto, standard or fast.
func CheckForwarder(s string) error {
	_, err := parseForwarderMode(s)
	return err
}

// parseForwarderMode reads Deps.Forwarder, which config does not validate.
func parseForwarderMode(s string) (forwarderMode, error) {
	switch s {
	case "", "auto", "standard", "fast":
		return modeOf(s), nil
	}
	return modeAuto, fmt.Errorf("proxy: forwarder %q: must be auto, standard or fast", s)
}

// modeOf is the mode of a forwarder config has validated: auto, standard or
// fast.
func modeOf(s string) forwarderMode {
	switch s {
	case "standard":
		return modeStandard
	case "fast":
		return modeFast
	}
	return modeAuto
}

// fastBodyCap is the largest request body the fast path reads into memory
// before sending it; auto sends bigger (and unknown-length) bodies the
// standard path, which streams them.
const fastBodyCap = 64 << 10

// forwarderFor picks the forwarder of one request.
func (rt *route) forwarderFor(r *http.Request, v *view) forwarder {
	switch {
	case rt.mode == modeStandard || rt.fast == nil:
		return rt.std
	case mustStandard(r, v):
		return rt.std
	case rt.mode == modeAuto && (rt.holdsSlot || preferStandard(r)):
		return rt.std
	}
	return rt.fast
}

// mustStandard reports a request the fast path cannot forward exactly as
// httputil.ReverseProxy would, so it never takes it, whatever the mode:
// protocol upgrades (WebSocket, h2c), request trailers, Expect (100-continue
// is negotiated hop by hop), a body on GET/HEAD, and a path with "//"
// (server.mergeSlashes: false), which fasthttp could take for a
// scheme-relative URL. What is sent is the same either way
// (appendUpstreamTarget); readTarget has refused the targets that could be
// read two ways, and CONNECT.
func mustStandard(r *http.Request, v *view) bool {
	if asksUpgrade(r) || len(r.Header["Expect"]) > 0 || r.Trailer != nil {
		return true
	}
	if r.ContentLength != 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		return true
	}
	return strings.Contains(v.path, "//")
}

// asksUpgrade reports a request asking to switch protocols (an h2c one was
// dropped before: dropH2CUpgrade): the one test of it, for the path it
// takes and for the deadline that bounds its handshake only.
func asksUpgrade(r *http.Request) bool { return len(r.Header["Upgrade"]) > 0 }

// preferStandard reports a request auto sends the standard path although
// the fast path could carry it: a request body that must stream (unknown
// length or over fastBodyCap), and clients that say they expect a stream
// (Accept: text/event-stream) or trailers (TE: trailers, as gRPC does).
func preferStandard(r *http.Request) bool {
	if r.ContentLength < 0 || r.ContentLength > fastBodyCap {
		return true
	}
	for _, v := range r.Header["Accept"] {
		if containsFold(v, "text/event-stream") {
			return true
		}
	}
	for _, v := range r.Header["Te"] {
		if containsFold(v, "trailers") {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains sub, ASCII case-insensitively,
// without allocating.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
