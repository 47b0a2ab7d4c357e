package proxy

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"sluice/config"

	"sluice/internal/match"
)

// view is the one reading of a request's target (SPEC §11, docs/configuration.md#one-view-of-a-request):
// Gateway.ServeHTTP decides it once, before routing, and everything after
// uses it alone: the routes match its path, the `path:` and `query:`
// sources read it, and both forwarders send exactly it (then stripPrefix
// and the target's own path and query). So what was limited is what is
// forwarded, whichever forwarder carries it.
type view struct {
	// path is the normalized path, escaped: unreserved escapes decoded,
	// other escapes kept (%2F is no separator) with their hex digits
	// upper-cased (RFC 3986 6.2.2.1: %2f is %2F, so no spelling of a
	// route's escape misses it), bytes a path may not hold raw escaped
	// (%XX), "//" merged when server.mergeSlashes. It is a valid escaped
	// path, so url.URL.EscapedPath keeps it as it is.
	path string
	// query is the raw query, byte for byte as the client sent it (no
	// "?"): what query sources read and the upstream receives.
	query string
}

// Why readTarget refuses a target (400, badTargetStatus).
const (
	badNone        = iota
	badFragment    // a '#' anywhere in the target
	badForm        // not a path: "*", opaque or authority-form
	badDot         // a "." or ".." segment, escaped or not
	badEscape      // a '%' not followed by two hex digits
	badQuery       // a query that url.ParseQuery reads differently from the raw bytes
	badHost        // a Host that is no host name or address (with a port)
	badParam       // a path parameter (';' or %3B) under server.pathParameters: refuse
	badMethod      // a standard method in another case ("get", "Post")
	badMethodToken // a method that is no token ("GET ", over h2)
	badSlash       // an escaped slash (%2F, %5C) under server.encodedSlashes: refuse
	badLength      // an h2 content-length that is no length, or not the body's
	badConnect     // CONNECT: a tunnel, which the gateway does not open (405)
	badLongPath    // a path over maxPathBytes (414)
	badMisdirected // tls.strictSni: a Host that is not the connection's SNI (421)
)

// maxPathBytes bounds a request's path (414 URI Too Long past it), as
// nginx's default 8 KiB request line does. Each API group's regular
// expression, a regex route's and the router's 405 check walk the whole
// path: a 60 KB path under 100 groups of unanchored regexes cost 0.3 s of
// CPU, refused by a rule or not, where an ordinary request costs 0.1 ms.
// The query is not bounded here (maxQueryParams, and the header limit).
const maxPathBytes = 8 << 10

// maxQueryParams is url.ParseQuery's limit: a Go upstream reads no more
// parameters than this, so a longer query is not forwarded.
const maxQueryParams = 10000

// readTarget decides r's view; bad is non-zero (and the request is
// answered 400, CONNECT 405) when the target cannot be read one way only:
//   - a '#' anywhere in the target: net/http leaves a fragment in the path or
//     the query, where the sources would read it and an upstream would drop it;
//   - a target that is not a path ("*", "http:opaque");
//   - the method CONNECT (readMethod);
//   - a dot segment ("." or "..", also escaped: %2e, ..%2f), which an
//     upstream may clean into another route's path;
//   - a query holding a ';' or a malformed escape, or more than 10,000
//     parameters: Go's url.ParseQuery (and so ReverseProxy and most Go
//     services) drops those parameters, which the sources would read;
//   - a path holding ';' or %3B (a path parameter) unless keepParams
//     (server.pathParameters: keep): Tomcat, Spring and RESTEasy strip
//     ";name=value" from a segment before routing;
//   - a method that is no token ("GET /admin?" as an h2 :method), or a
//     standard method spelt in another case ("get"): chi knows only
//     "GET", so a route of methods: [GET] missed it and a route taking every
//     method served it, while Django, Flask, Symfony and ASP.NET read it as
//     GET (nginx refuses it too);
//   - a Host that is no host name or address (match.PlainHost): net/http takes
//     "victim.example," (RFC 3986 lets a reg-name hold sub-delims), which
//     misses the routes of victim.example and their rules, while an
//     upstream reading X-Forwarded-Host as a list (Express, Rails) gets
//     victim.example;
//   - under tls.strictSni, a Host over TLS that is not the connection's
//     SNI, compared as the routes compare hosts (421, RFC 9110 15.5.20): a
//     connection made for shop.example may otherwise ask for api.example
//     (domain fronting), past whatever was decided by the name, and a
//     browser that coalesced two names on one HTTP/2 connection retries a
//     421 on a connection of the Host's own.
//
// A target that needs no change (no escapes, no "//", no byte a path may
// not hold raw) costs no allocation.
func readTarget(r *http.Request, rules targetRules) (v view, bad int) {
	if bad = readMethod(r.Method); bad != badNone {
		return v, bad
	}
	if !match.PlainHost(r.Host) {
		return v, badHost
	}
	if rules.strictSNI && r.TLS != nil && match.Host(r.Host) != match.Host(r.TLS.ServerName) {
		return v, badMisdirected
	}
	if r.ProtoMajor == 2 && !h2Length(r) {
		return v, badLength
	}
	v, ok := plainTarget(r.RequestURI)
	if !ok {
		if v, bad = readTargetLong(r, rules.mergeSlashes); bad != badNone {
			return v, bad
		}
	}
	switch {
	case len(v.path) > maxPathBytes:
		return view{}, badLongPath
	case !rules.keepParams && config.HasPathParameter(v.path):
		return view{}, badParam
	case rules.refuseSlashes && config.HasEncodedSlash(v.path):
		return view{}, badSlash
	}
	return v, badNone
}

// h2Length reports whether an h2 request's content-length fields, if any,
// all state the length Go's h2 server read from the first: it reads only
// that one, as 0 when it is no number, so "abc" or "5" on a stream that
// ends with its headers was forwarded as a request with no body, and
// counted, where RFC 9113 §8.1.1 calls the request malformed, not to be
// forwarded. HTTP/1's server refuses such fields itself.
func h2Length(r *http.Request) bool {
	cl, ok := r.Header["Content-Length"]
	if !ok {
		return true
	}
	for _, v := range cl {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil || int64(n) != r.ContentLength {
			return false
		}
	}
	return true
}

// h2EmptyBody waits, for an h2 request that declares a content-length of
// 0, for the end of its stream, and returns the status to refuse it with
// (0: none): 400 when content comes instead, 408 when the stream has not
// ended within timeout (server.readHeaderTimeout: a request declared empty
// is not whole before its end). Go's h2 server hands a request to the
// handler at its headers, and resets the stream if content then comes
// after a length of 0; but the gateway, reading no body of that length,
// had forwarded a POST with no body and counted it: the upstream served a
// request the client never sent, where RFC 9113 §8.1.1 calls it malformed,
// not to be forwarded. A stream that ended with its headers costs one Read
// that returns at once; h2Length has refused any other content-length.
func h2EmptyBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) int {
	if r.ProtoMajor != 2 || r.ContentLength != 0 || len(r.Header["Content-Length"]) == 0 ||
		r.Body == nil || r.Body == http.NoBody {
		return 0
	}
	rc := http.NewResponseController(w)
	if timeout > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	var end [1]byte
	switch err := bodyEnd(r.Body, end[:]); {
	case err == nil:
		r.Body = http.NoBody
		return 0
	case errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// targetRules are the server settings a request's target is read by.
type targetRules struct {
	mergeSlashes bool // server.mergeSlashes
	// keepParams: server.pathParameters keep; else a path holding ';' is
	// 400 (Tomcat, Spring and RESTEasy strip ";x" from a segment, so
	// /api;x/admin would reach /api/admin past its routes' rules).
	keepParams bool
	// refuseSlashes: server.encodedSlashes refuse; a path holding %2F or
	// %5C is 400 (WSGI, gin and nginx's proxy_pass decode it before
	// routing).
	refuseSlashes bool
	// strictSNI: tls.strictSni; a request over TLS whose Host is not the
	// connection's SNI is 421 (Deps.StrictSNI).
	strictSNI bool
}

// readTargetLong is readTarget for any target; plainTarget is its short
// cut for the common one, and must agree with it.
func readTargetLong(r *http.Request, mergeSlashes bool) (v view, bad int) {
	raw, ok := rawPath(r)
	if !ok {
		return v, badForm
	}
	if strings.IndexByte(r.RequestURI, '#') >= 0 || r.URL.Fragment != "" {
		return v, badFragment
	}
	if hasDotSegment(r.URL.Path) {
		return v, badDot
	}
	if v.path, ok = match.NormalizePath(raw, mergeSlashes); !ok {
		return v, badEscape
	}
	v.query = r.URL.RawQuery
	if !plainQuery(v.query) {
		return v, badQuery
	}
	return v, badNone
}

// plainTarget reads, in one pass, the common target that needs no change:
// origin-form, its path of bytes a path holds raw with no '%', no "//" and
// no "/." (so no dot segment either), and a plain query (plainQuery) with no
// '#'. ok is false for anything else, which readTarget reads the long way.
func plainTarget(ruri string) (v view, ok bool) {
	if ruri == "" || ruri[0] != '/' {
		return v, false
	}
	if len(ruri) > 1 && (ruri[1] == '.' || ruri[1] == '/') {
		return v, false
	}
	i := 1
	for ; i < len(ruri); i++ {
		c := ruri[i]
		if c == '/' && (ruri[i-1] == '/' || i+1 < len(ruri) && ruri[i+1] == '.') {
			return v, false
		}
		if !plainPathByte[c] {
			break
		}
	}
	switch {
	case i == len(ruri):
		return view{path: ruri}, true
	case ruri[i] != '?':
		return v, false
	}
	q := ruri[i+1:]
	if q == "" || strings.IndexByte(q, '#') >= 0 || !plainQuery(q) {
		return v, false // an empty "?" is dropped the long way
	}
	return view{path: ruri[:i], query: q}, true
}

// plainPathByte: the bytes a path holds raw (match.PathByte), '%' excepted.
var plainPathByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = match.PathByte(byte(c)) && c != '%'
	}
	return t
}()

// rawPath is the path of r's target as the client wrote it (escapes
// kept), "/" for an empty one; false for a target that is no path.
func rawPath(r *http.Request) (string, bool) {
	ruri := r.RequestURI
	switch {
	case ruri == "":
		// Built in-process (tests, not a server): its URL is all there is.
		if r.URL.Opaque != "" {
			return "", false
		}
		return orRoot(r.URL.EscapedPath()), true
	case ruri[0] == '/':
		p, _, _ := strings.Cut(ruri, "?")
		return p, true
	case r.URL.Opaque != "" || r.URL.Host == "":
		return "", false // "*", "http:x", a relative path without its slash
	}
	// absolute-form, scheme://authority/path?query
	i := strings.Index(ruri, "://")
	if i < 0 {
		return "", false
	}
	rest := ruri[i+3:]
	j := strings.IndexAny(rest, "/?")
	if j < 0 || rest[j] == '?' {
		return "/", true
	}
	p, _, _ := strings.Cut(rest[j:], "?")
	return p, true
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// plainQuery reports a query that Go's url.ParseQuery reads as its bytes
// say, and that a request line can carry: no ';' and no space, every '%' followed by two hex digits, at most
// maxQueryParams parameters. (ReverseProxy re-encodes any other query,
// dropping what it cannot parse, which the sources would have read.)
func plainQuery(q string) bool {
	if q == "" {
		return true
	}
	n := 1
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';', ' ':
			// ' ': HTTP/1.1 cannot carry it, but an HTTP/2 :path can,
			// and the upstream's request line would end at it.
			return false
		case '&':
			if n++; n > maxQueryParams {
				return false
			}
		case '%':
			if i+2 >= len(q) || !match.IsHex(q[i+1]) || !match.IsHex(q[i+2]) {
				return false
			}
			i += 2
		}
	}
	return true
}

// unescapedPath is the decoded form of an escaped path (%2F becomes '/');
// p itself when it holds no escape.
func unescapedPath(p string) string {
	if strings.IndexByte(p, '%') < 0 {
		return p
	}
	if u, err := url.PathUnescape(p); err == nil {
		return u
	}
	return p
}

// hasDotSegment reports a "." or ".." path segment (after unescaping, so
// %2e%2e and ..%2f count too), with or without ";parameters" (Tomcat,
// Jetty and Spring drop them, then clean "..;/" as "../"), and delimited
// by '\' as well as '/' (IIS and ASP.NET read a backslash as a slash, so
// "..\" and "..%5C" count too). Such a path could match one route here
// and be cleaned into another route's path by the upstream, escaping the
// first route's rules, so it is refused rather than forwarded.
func hasDotSegment(p string) bool {
	if !strings.Contains(p, "/.") && !strings.Contains(p, "\\.") {
		return false
	}
	for p != "" {
		var seg string
		if i := strings.IndexAny(p, "/\\"); i >= 0 {
			seg, p = p[:i], p[i+1:]
		} else {
			seg, p = p, ""
		}
		if i := strings.IndexByte(seg, ';'); i >= 0 {
			seg = seg[:i]
		}
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// stripsToDot reports a path (a view's) that the route's stripPrefix
// turns into one whose first segment is a dot segment: "/api../admin"
// under prefix "/api" is sent as "/../admin", which the upstream cleans
// into "/admin". Only that segment is new; the others were checked when
// the target was read.
func stripsToDot(p, prefix string) bool {
	s := stripPrefix(p, prefix)
	return len(s) > 1 && s[1] == '.' && hasDotSegment(unescapedPath(s))
}

// readMethod refuses a method that is not an RFC 9110 token, and one of
// the standard methods spelt in another case. Go's HTTP/1 server refuses a
// method that is no token, but its h2 server takes any :method: "GET " or
// "GET /admin?" missed a route of methods: [GET] and its limit, and the
// fast path wrote it into the upstream's request line, where nginx and
// Python read GET /item/x. Methods are case-sensitive (RFC 9110), but many
// upstreams upper-case what they receive.
//
// CONNECT is refused (405, as nginx does) in every form, h2's extended
// CONNECT included: what follows its header is a tunnel's bytes, which the
// gateway would forward unframed after "CONNECT / HTTP/1.1" (Go writes a
// CONNECT's body raw), so an upstream read them as requests that no route,
// rule or header rewrite saw; and an upstream that answered 2xx would turn
// a pooled connection into a tunnel.
func readMethod(m string) int {
	if m == http.MethodConnect {
		return badConnect
	}
	folded := false
	for _, std := range standardMethods { // GET, the common one, first
		if m == std {
			return badNone
		}
		folded = folded || strings.EqualFold(m, std)
	}
	switch {
	case folded:
		return badMethod
	case !config.IsToken(m):
		return badMethodToken
	}
	return badNone
}

var standardMethods = [...]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace}
