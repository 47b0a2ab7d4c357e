package proxy

import (
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"sluice/internal/match"
)

// cookieValues adds the values of every cookie called name, without
// parsing the others.
//
// A cookie is read as the servers behind sluice read it, each of their
// readings a value, so that no spelling of a cookie is a fresh key to the
// limits while the upstream reads another:
//   - The name is trimmed of white space after cutting at '=', as
//     net/http's readCookies (Request.Cookie), Python and Node do
//     ("sid =abc" is sid=abc), and read percent-decoded too, as PHP's
//     $_COOKIE and Rack 2 read it (s%69d is sid), with PHP's mangling
//     (cookieName).
//   - The value is keyed decoded (cookieKey): Node's cookie, PHP and Rack
//     decode it, so vict%69m is victim to them.
//   - A ';'-part holding a ',' is also split at each ',': Rack 2 reads
//     "x=1, sid=abc" as a cookie sid=abc. Python's SimpleCookie (Bottle,
//     CherryPy) splits at white space: "x=1 sid=abc" is sid=abc to it.
//   - A value that opens a double quote it does not close is also read as
//     Node's cookie 0.x (Express 4) reads it, its first and last bytes
//     dropped: sid="abcZ is abc to it.
//   - A quoted value is also read as Python's servers unquote it
//     (pythonCookie): "\166ictim" is victim to Django, Flask and
//     Starlette, and Flask and SimpleCookie read "a;b" as one value.
func cookieValues(lines []string, name string, vs *valueSet) {
	for _, line := range lines {
		for i := 0; i < len(line); {
			end := strings.IndexByte(line[i:], ';')
			if end < 0 {
				end = len(line)
			} else {
				end += i
			}
			if !cookiePart(line, i, end, name, vs) {
				return
			}
			i = end + 1
		}
	}
}

// joinCookieLines makes the Cookie lines of a request one line, joined by
// "; " as an HTTP/2 hop must join them (RFC 9113 §8.2.3) and as net/http's
// HTTP/2 server does. A client sends one (RFC 6265 §5.4); with two, each
// server behind reads them its own way (the first, the last, or joined by
// ", ", where a quote opened on one line closes on the next), so both
// forwarders send the one line the limits read.
func joinCookieLines(r *http.Request) {
	if c := r.Header["Cookie"]; len(c) > 1 {
		r.Header["Cookie"] = []string{strings.Join(c, "; ")}
	}
}

// cookiePart reads the ';'-part line[start:end]; false when vs is full.
func cookiePart(line string, start, end int, name string, vs *valueSet) bool {
	part := line[start:end]
	eq := strings.IndexByte(part, '=')
	if eq >= 0 && cookieName(part[:eq], name, !vs.one) && !addCookie(line, start+eq+1, end, vs) {
		return false
	}
	if vs.one {
		return true
	}
	t := trimCookieSpace(part)
	if strings.IndexByte(t, ',') >= 0 {
		// Rack 2: split at ',' too, spaces after it dropped.
		for i := start; i < end; {
			j := strings.IndexByte(line[i:end], ',')
			if j < 0 {
				j = end
			} else {
				j += i
			}
			sub := line[i:j]
			if e := strings.IndexByte(sub, '='); e >= 0 && cookieName(sub[:e], name, !vs.one) && !addCookie(line, i+e+1, j, vs) {
				return false
			}
			i = j + 1
		}
	}
	if hasSimpleCookieSpace(t) {
		return simpleCookieParts(line, start, end, name, vs)
	}
	return true
}

// simpleCookieParts reads a ';'-part with white space inside as Python's
// SimpleCookie does: every "name = value" in it, the value up to white
// space or, quoted, to its closing quote. A name is read back from its
// '=' to white space or the '=' before it (SimpleCookie takes the shortest
// name, so x=a=sid=v has none but x; reading sid too is stricter), which
// keeps the scan linear in the part: a part of a million '=' is read once.
func simpleCookieParts(line string, start, end int, name string, vs *valueSet) bool {
	prev := start // where the name before the next '=' may start
	for eq := start; eq < end; eq++ {
		if line[eq] != '=' {
			continue
		}
		from := prev
		prev = eq + 1
		ne := eq
		for ne > from && simpleCookieSpace(line[ne-1]) {
			ne--
		}
		ns := ne
		for ns > from && !simpleCookieSpace(line[ns-1]) {
			ns--
		}
		if ns == ne || !cookieName(line[ns:ne], name, !vs.one) {
			continue
		}
		v := eq + 1
		for v < end && simpleCookieSpace(line[v]) {
			v++
		}
		ve := v
		if ve < end && line[ve] == '"' {
			if q := closingQuote(line[ve:end]); q > 0 {
				ve += q + 1
			} else {
				ve = end
			}
		} else {
			for ve < end && !simpleCookieSpace(line[ve]) {
				ve++
			}
		}
		if !addCookie(line, v, ve, vs) {
			return false
		}
	}
	return true
}

// addCookie adds the readings of the cookie value line[start:end]; false
// when vs is full. line is the whole Cookie line: Python's servers read a
// quoted value on past a ';' (quotedSpan).
func addCookie(line string, start, end int, vs *valueSet) bool {
	v := trimCookieSpace(line[start:end])
	if vs.one {
		if key, _ := cookieKey(v); !vs.add(key) {
			return false
		}
	} else {
		if !addCookieKeys(v, vs) {
			return false
		}
		if len(v) > 1 && v[0] == '"' && v[len(v)-1] != '"' && !addCookieKeys(v[1:len(v)-1], vs) {
			return false
		}
	}
	if raw := line[start:end]; strings.IndexByte(raw, '\\') >= 0 || !ascii(raw) {
		for _, mode := range [...]pyMode{pyDjango, pyWerkzeug, pyLatin1} {
			if key, _ := cookieKey(pythonCookie(raw, mode)); !vs.add(key) {
				return false
			}
		}
	}
	if span, ok := quotedSpan(line[start:]); ok {
		// Werkzeug and SimpleCookie read a quoted string on past ';'.
		for _, mode := range [...]pyMode{pyWerkzeug, pyLatin1} {
			if key, _ := cookieKey(pythonCookie(span, mode)); !vs.add(key) {
				return false
			}
		}
	}
	return true
}

// addCookieKeys adds v's key and, when Node's decodeURIComponent would
// throw on it (a '%' that is no escape, or escapes that are no UTF-8),
// the key of v undecoded: Node then reads v as written (%zz%41), where
// PHP reads %zzA.
func addCookieKeys(v string, vs *valueSet) bool {
	k, malformed := cookieKey(v)
	if !vs.add(k) {
		return false
	}
	if malformed {
		return vs.add(bareCookie(strings.ReplaceAll(bareCookie(v), "+", " ")))
	}
	return true
}

// cookieName reports whether a cookie's name as written (k, before its
// '=') is name: trimmed of white space (trimCookieSpace), as net/http,
// Python and Node read it, then as formName reads it. It allocates
// nothing.
func cookieName(k, name string, fold bool) bool { return formName(trimCookieSpace(k), name, fold) }

// formName reports whether a form field's or cookie's name as written (k)
// is name: as written, or as PHP reads it into $_GET and $_COOKIE:
// percent-decoded ('+' a space, as Rack 2 and Python read it too),
// leading spaces skipped, ended by a NUL, and ' ', '.' and '[' read as '_'
// (s.id, s%20id and s_id%00x are s_id to PHP); or name followed by a
// bracket group closed somewhere after it (key[], key[0], key%5Bx%5D):
// PHP, Rack and Express's qs read those as key, an array or a map of the
// values, and Rails' find_by(token: params[:key]) finds the same record.
// With fold, letter case is ignored in all of these: ASP.NET Core reads
// query and cookie names so (Request.Query["id"] is ?Id= and ?ID=). A
// param rule folds, so that no casing carries a value past its limit; a
// source that must give one value does not, or a browser holding the
// distinct cookies sid and SID (RFC 6265 names are case-sensitive) would
// be refused 400 on every route. It allocates nothing.
func formName(k, name string, fold bool) bool {
	if k == name {
		return true
	}
	if strings.IndexByte(k, '%') < 0 && strings.IndexByte(k, '+') < 0 && strings.IndexByte(k, '[') < 0 &&
		strings.IndexByte(name, '_') < 0 {
		return fold && len(k) == len(name) && strings.EqualFold(k, name)
	}
	i := 0
	for i < len(k) { // PHP skips the leading spaces of the decoded name
		c, next, _ := formByte(k, i)
		if c != ' ' {
			break
		}
		i = next
	}
	j := 0
	for ; i < len(k); j++ {
		var c byte
		c, i, _ = formByte(k, i)
		if c == 0 {
			break // PHP's name is a C string
		}
		if j == len(name) {
			return c == '[' && closesBracket(k, i)
		}
		if name[j] != c && (!fold || lowerASCII(name[j]) != lowerASCII(c)) && (name[j] != '_' || c != ' ' && c != '.' && c != '[') {
			return false
		}
	}
	return j == len(name)
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// closesBracket reports whether the name k holds a ']', raw or escaped,
// from i on: a '[' before i is then an array's or a map's, not a '_'.
func closesBracket(k string, i int) bool {
	for i < len(k) {
		var c byte
		c, i, _ = formByte(k, i)
		if c == 0 {
			return false
		}
		if c == ']' {
			return true
		}
	}
	return false
}

// cookieKey is the key of a cookie value: bare (bareCookie) and, when it
// holds an escape or a '+', percent-decoded as PHP's urldecode does ('+'
// a space, each valid %XX its byte, any other '%' kept), then bare again.
// A decoded '+' is a space too: Node reads a+b and a%2Bb as "a+b", PHP as
// "a b" and "a+b", so one key for all three is the only one that is one
// key to both. So the spellings that one server or another reads as one
// value are one key (the trimming and decoding merge a few values
// net/http tells apart into one bucket: stricter, never a way past).
// Only a value that must be decoded allocates.
// malformed reports a '%' that is no escape, or escapes that decode to
// no UTF-8.
func cookieKey(v string) (key string, malformed bool) {
	v = bareCookie(v)
	if strings.IndexByte(v, '%') < 0 && strings.IndexByte(v, '+') < 0 {
		return v, false
	}
	b := make([]byte, 0, len(v))
	escaped := false
	for i := 0; i < len(v); {
		c, next, esc := formByte(v, i)
		switch {
		case esc:
			if c == '+' {
				c = ' ' // %2B: a '+' to Node, which reads a raw '+' as itself
			}
			escaped = escaped || c >= utf8.RuneSelf
		case c == '%':
			malformed = true
		}
		b = append(b, c)
		i = next
	}
	if escaped && !utf8.Valid(b) {
		malformed = true
	}
	return bareCookie(string(b)), malformed
}

// bareCookie is v without the white space (trimCookieSpace) and double
// quotes around it, however they nest: each server strips some of them
// (Go none, Python one pair after trimming, Node a leading quote and the
// last byte), and every such reading of a value is bare the same.
func bareCookie(v string) string {
	for {
		t := strings.Trim(trimCookieSpace(v), `"`)
		if t == v {
			return t
		}
		v = t
	}
}

// cookieSpaceByte is the white space trimmed around a cookie's name and
// value: Python's str.strip() of a header read as Latin-1 (Starlette,
// SimpleCookie) strips \t\n\v\f\r, 0x1c-0x1f, ' ', 0x85 and 0xa0, and
// Node's trim() 0xa0. trimCookieSpace also trims what Python strips of a
// header read as UTF-8 (Django, Flask): Unicode white space.
var cookieSpaceByte = func() (t [256]bool) {
	for _, c := range []byte("\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0") {
		t[c] = true
	}
	return t
}()

// trimCookieSpace trims white space around a cookie's name or value:
// cookieSpaceByte's bytes and Unicode white space written in UTF-8.
func trimCookieSpace(s string) string {
	for s != "" {
		if c := s[0]; c < utf8.RuneSelf {
			if !cookieSpaceByte[c] {
				break
			}
			s = s[1:]
			continue
		}
		if r, n := utf8.DecodeRuneInString(s); n > 1 && pySpace(r) {
			s = s[n:]
		} else if cookieSpaceByte[s[0]] {
			s = s[1:]
		} else {
			break
		}
	}
	for s != "" {
		if c := s[len(s)-1]; c < utf8.RuneSelf {
			if !cookieSpaceByte[c] {
				break
			}
			s = s[:len(s)-1]
			continue
		}
		if r, n := utf8.DecodeLastRuneInString(s); n > 1 && pySpace(r) {
			s = s[:len(s)-n]
		} else if cookieSpaceByte[s[len(s)-1]] {
			s = s[:len(s)-1]
		} else {
			break
		}
	}
	return s
}

// hasSimpleCookieSpace reports white space where SimpleCookie splits
// (its pattern is re.ASCII: \s is ASCII).
func hasSimpleCookieSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		if simpleCookieSpace(s[i]) {
			return true
		}
	}
	return false
}

func simpleCookieSpace(c byte) bool { return c == ' ' || '\t' <= c && c <= '\r' }

// pySpace is Python's str.isspace: Unicode white space and 0x1c-0x1f.
func pySpace(r rune) bool {
	return unicode.IsSpace(r) || 0x1c <= r && r <= 0x1f
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// formByte is the byte of v at i as PHP's urldecode reads it: '+' a
// space, a valid %XX its byte (escaped); next is where the following one
// starts. Anything else, a '%' that is no escape too, is itself.
func formByte(v string, i int) (c byte, next int, escaped bool) {
	switch c = v[i]; {
	case c == '+':
		return ' ', i + 1, false
	case c == '%' && i+2 < len(v) && match.IsHex(v[i+1]) && match.IsHex(v[i+2]):
		return match.Unhex(v[i+1])<<4 | match.Unhex(v[i+2]), i + 3, true
	}
	return c, i + 1, false
}
