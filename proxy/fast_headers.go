package proxy

import (
	"bytes"
	"net/http"
	"strings"
	"unsafe"

	"github.com/valyala/fasthttp"

	"sluice/config"
)

// dropResponseHeader reports the upstream's hop-by-hop response headers.
// Trailer is kept: ReverseProxy re-announces the trailers it will send.
func dropResponseHeader(k []byte) bool {
	return string(k) != "Trailer" && config.HopByHop(readOnlyString(k))
}

// listedIn reports whether name is one of the comma-separated tokens of the
// Connection header values (those name more hop-by-hop headers).
func listedIn(conn []string, name string) bool {
	for _, v := range conn {
		if hasToken(v, name) {
			return true
		}
	}
	return false
}

// connNames are the names a message's Connection lines list, asked of each
// of its header lines. A real client's or upstream's are a word or two
// ("keep-alive"), scanned in place without allocating; longer lines are
// put in a set once. Scanning thousands of tokens for each of thousands of
// lines cost O(lines x tokens): 0.8 s of CPU for one 66 KB request.
type connNames struct {
	lines []string
	set   map[string]struct{} // ASCII lower-case tokens, past connScanBytes
}

// connScanBytes is the length of Connection lines scanned in place.
const connScanBytes = 256

func connNamesOf(lines []string) connNames {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	if n <= connScanBytes {
		return connNames{lines: lines}
	}
	set := make(map[string]struct{})
	for _, l := range lines {
		for l != "" {
			var t string
			t, l, _ = strings.Cut(l, ",")
			if t = strings.TrimSpace(t); t != "" {
				set[asciiLower(t)] = struct{}{}
			}
		}
	}
	return connNames{set: set}
}

// has reports whether the Connection lines list name, ASCII
// case-insensitively.
func (c connNames) has(name string) bool {
	if c.set == nil {
		return listedIn(c.lines, name)
	}
	var buf [64]byte
	if len(name) > len(buf) {
		_, ok := c.set[asciiLower(name)]
		return ok
	}
	b := buf[:len(name)]
	for i := range b {
		b[i] = lowerASCII(name[i])
	}
	_, ok := c.set[string(b)] // no allocation: the compiler reads b in place
	return ok
}

// asciiLower is s with its ASCII letters lower-cased, allocating only if
// it has one in upper case. Header names are ASCII; ReverseProxy removes
// what Connection names by the canonical key, which folds ASCII alone, and
// so does the fast path (hasToken too), where strings.ToLower and
// EqualFold fold Unicode.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if lowerASCII(s[i]) != s[i] {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = lowerASCII(b[j])
			}
			return string(b)
		}
	}
	return s
}

// equalFoldASCII is strings.EqualFold for ASCII letters alone.
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

// hasToken reports whether the comma-separated list v holds tok, ASCII
// case-insensitively.
func hasToken(v, tok string) bool {
	for v != "" {
		var t string
		t, v, _ = strings.Cut(v, ",")
		if equalFoldASCII(strings.TrimSpace(t), tok) {
			return true
		}
	}
	return false
}

// copyResponseHeader copies the upstream's response header into dst, minus
// hop-by-hop fields: those of dropResponseHeader and those that any of the
// upstream's Connection lines names (ReverseProxy drops what every line
// names). One pass over fasthttp's fields notes the fields to copy and the
// Connection lines, without Peek, which copies and normalizes the name it
// is given. Common names are interned and every value shares one string
// and one []string backing, so a response header costs two allocations
// however many fields it has. trailer: the answer announces trailers (a
// Trailer field), so net/http would write no length of its own
// (netLengthMax).
func copyResponseHeader(dst http.Header, src *fasthttp.ResponseHeader, c *fastCall) (trailer bool) {
	c.vals, c.fields, c.conn = c.vals[:0], c.fields[:0], c.conn[:0]
	for k, v := range src.All() {
		switch {
		case string(k) == "Connection":
			c.conn = append(c.conn, readOnlyString(v))
		case !dropResponseHeader(k):
			trailer = trailer || string(k) == "Trailer"
			c.fields = append(c.fields, upstreamField{k, len(v)})
			c.vals = append(c.vals, v...)
		}
	}
	n := len(c.fields)
	if n == 0 {
		return trailer
	}
	all := string(c.vals)
	backing := make([]string, n)
	conn := connNamesOf(c.conn)
	_, legacy := dst[legacyLimit] // the gateway's own, set before the answer
	i, off := 0, 0
	for j, f := range c.fields {
		s := all[off : off+f.n]
		off += f.n
		if len(c.conn) > 0 && conn.has(readOnlyString(f.name)) {
			continue
		}
		if legacy && legacyField(f.name) {
			continue
		}
		backing[i] = s
		key := c.name(j, f.name)
		if prev, ok := dst[key]; ok {
			dst[key] = append(prev, s)
		} else {
			dst[key] = backing[i : i+1 : i+1]
		}
		i++
	}
	return trailer
}

// name returns the j-th field's name k as a string: the one the last
// answer copied with this call had there when it is the same (an upstream
// names its fields alike from one answer to the next, in the same order),
// else headerKey's, kept for the next answer. A string compare, where
// headerKey costs a map lookup and allocates for a name it does not know.
func (c *fastCall) name(j int, k []byte) string {
	if j < len(c.names) && c.names[j] == string(k) {
		return c.names[j]
	}
	s := headerKey(k)
	switch {
	case j < len(c.names):
		c.names[j] = s
	case j == len(c.names) && j < maxKeptNames:
		c.names = append(c.names, s)
	}
	return s
}

// maxKeptNames bounds fastCall.names: an answer's fields past it are
// named by headerKey every time.
const maxKeptNames = 32

// upstreamField is a field of the upstream's answer to copy: its name (in
// fasthttp's buffer) and the length of its value in fastCall.vals.
type upstreamField struct {
	name []byte
	n    int
}

// readOnlyString is b's bytes as a string, not copied, for a reader done
// with it before b changes (fasthttp's header buffers, within one answer).
func readOnlyString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// headerKey returns k as a string, without allocating for common names.
func headerKey(k []byte) string {
	if s, ok := commonHeaderNames[string(k)]; ok {
		return s
	}
	return string(k)
}

// commonHeaderNames interns the usual response header names. Read-only.
var commonHeaderNames = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept-Ranges", "Access-Control-Allow-Credentials", "Access-Control-Allow-Headers",
		"Access-Control-Allow-Methods", "Access-Control-Allow-Origin", "Access-Control-Expose-Headers",
		"Access-Control-Max-Age", "Age", "Allow", "Alt-Svc", "Cache-Control", "Content-Disposition",
		"Content-Encoding", "Content-Language", "Content-Length", "Content-Location", "Content-Range",
		"Content-Security-Policy", "Content-Type", "Date", "Etag", "Expires", "Last-Modified", "Link",
		"Location", "Pragma", "Ratelimit", "Ratelimit-Policy", "Referrer-Policy", "Retry-After", "Server",
		"Set-Cookie", "Strict-Transport-Security", "Trailer", "Vary", "Via", "Www-Authenticate",
		"X-Content-Type-Options", "X-Frame-Options", "X-Request-Id", "X-Xss-Protection",
	} {
		m[k] = k
	}
	return m
}()

// isEventStream reports a text/event-stream media type (parameters allowed).
func isEventStream(ct []byte) bool {
	ct = bytes.TrimLeft(ct, " \t")
	const es = "text/event-stream"
	if len(ct) < len(es) || !bytes.EqualFold(ct[:len(es)], []byte(es)) {
		return false
	}
	rest := ct[len(es):]
	return len(rest) == 0 || rest[0] == ';' || rest[0] == ' ' || rest[0] == '\t'
}
