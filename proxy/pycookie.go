package proxy

import (
	"strings"
	"unicode/utf8"
)

// pyMode is how a Python server reads a cookie header's bytes.
type pyMode uint8

const (
	// pyDjango: Django reads the header as UTF-8, each ill-formed
	// sequence U+FFFD, strips Unicode white space and unquotes with
	// http.cookies' rules, an octal escape a code point (\351 is é).
	pyDjango pyMode = iota
	// pyWerkzeug: Werkzeug (Flask) reads it as UTF-8 too, but an octal
	// escape is a byte, and the unquoted bytes are read as UTF-8 again
	// (\351 alone is U+FFFD).
	pyWerkzeug
	// pyLatin1: Starlette and SimpleCookie read it as Latin-1: white
	// space is a byte (cookieSpaceByte) and an octal escape a byte.
	pyLatin1
)

// pythonCookie is a cookie value (raw, after its '=') as a Python server
// reads it, in UTF-8 for pyDjango and pyWerkzeug, as bytes for pyLatin1:
// trimmed of white space and, if it then opens and closes a double quote,
// unquoted: the quotes dropped, \ooo (octal, up to \377) the byte or code
// point, a backslash before anything else (but a newline) dropped. It
// allocates only for a value that is no UTF-8 or holds a backslash.
func pythonCookie(v string, mode pyMode) string {
	if mode == pyLatin1 {
		for v != "" && cookieSpaceByte[v[0]] {
			v = v[1:]
		}
		for v != "" && cookieSpaceByte[v[len(v)-1]] {
			v = v[:len(v)-1]
		}
	} else {
		v = pyUnicodeStrip(pyUTF8(v))
	}
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return v
	}
	v = v[1 : len(v)-1]
	if strings.IndexByte(v, '\\') < 0 {
		return v
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' || i+1 == len(v) || v[i+1] == '\n' {
			b = append(b, c)
			continue
		}
		if i+3 < len(v) && '0' <= v[i+1] && v[i+1] <= '3' && isOctal(v[i+2]) && isOctal(v[i+3]) {
			n := (v[i+1]-'0')<<6 | (v[i+2]-'0')<<3 | (v[i+3] - '0')
			if mode == pyDjango {
				b = utf8.AppendRune(b, rune(n))
			} else {
				b = append(b, n)
			}
			i += 3
			continue
		}
		// The escaped character stays; a UTF-8 sequence's other bytes
		// follow as they are.
		b = append(b, v[i+1])
		i++
	}
	if mode == pyWerkzeug {
		return pyUTF8(string(b))
	}
	return string(b)
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }

// quotedSpan is the double-quoted string v opens (after white space), when
// it runs on past a ';': Werkzeug's and SimpleCookie's cookie patterns read
// a quoted string whole, "(?:[^\\"]|\\.)*", so sid="a;b" is a;b to them.
// ok is false when v opens none or it closes before any ';'.
func quotedSpan(v string) (span string, ok bool) {
	for v != "" && cookieSpaceByte[v[0]] {
		v = v[1:]
	}
	if v == "" || v[0] != '"' {
		return "", false
	}
	q := closingQuote(v)
	if q < 0 || strings.IndexByte(v[:q], ';') < 0 {
		return "", false
	}
	return v[:q+1], true
}

// closingQuote is the index of the double quote that closes the quoted
// string v opens (v[0] == '"'), a backslash escaping the byte after it but
// a newline; -1 when there is none.
func closingQuote(v string) int {
	for i := 1; i < len(v); i++ {
		switch v[i] {
		case '\\':
			if i+1 < len(v) && v[i+1] == '\n' {
				return -1 // Python's '.' matches no newline: no quoted string
			}
			i++
		case '"':
			return i
		}
	}
	return -1
}

// pyUnicodeStrip is Python's str.strip() of UTF-8 text (pySpace).
func pyUnicodeStrip(s string) string {
	for s != "" {
		r, n := utf8.DecodeRuneInString(s)
		if !pySpace(r) {
			break
		}
		s = s[n:]
	}
	for s != "" {
		r, n := utf8.DecodeLastRuneInString(s)
		if !pySpace(r) {
			break
		}
		s = s[:len(s)-n]
	}
	return s
}

// pyUTF8 is Python's bytes.decode(errors="replace"), in UTF-8: each
// maximal subpart of an ill-formed sequence is one U+FFFD (Unicode's
// recommended practice; Go's strings.ToValidUTF8 writes one for a run).
func pyUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			b = append(b, s[i])
			i++
			continue
		}
		if r, n := utf8.DecodeRuneInString(s[i:]); r != utf8.RuneError || n > 1 {
			b = append(b, s[i:i+n]...)
			i += n
			continue
		}
		i += maximalSubpart(s[i:])
		b = append(b, "\uFFFD"...)
	}
	return string(b)
}

// maximalSubpart is the length of the ill-formed sequence at the start of
// s: its lead byte and the continuation bytes that could still have
// completed it (Unicode 15, table 3-7).
func maximalSubpart(s string) int {
	need, lo, hi := 0, byte(0x80), byte(0xbf)
	switch c := s[0]; {
	case 0xc2 <= c && c <= 0xdf:
		need = 1
	case c == 0xe0:
		need, lo = 2, 0xa0
	case c == 0xed:
		need, hi = 2, 0x9f
	case 0xe1 <= c && c <= 0xef:
		need = 2
	case c == 0xf0:
		need, lo = 3, 0x90
	case c == 0xf4:
		need, hi = 3, 0x8f
	case 0xf1 <= c && c <= 0xf3:
		need = 3
	default:
		return 1
	}
	n := 1
	for n <= need && n < len(s) && lo <= s[n] && s[n] <= hi {
		n++
		lo, hi = 0x80, 0xbf
	}
	return n
}
