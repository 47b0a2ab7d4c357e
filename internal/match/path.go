package match

import "strings"

// NormalizePath returns a request path normalized as SPEC §11 says (and
// proxy's view.path reads it): escaped unreserved characters decoded,
// other escapes upper-cased, bytes a path may not hold raw escaped, '//'
// merged with mergeSlashes, "" read as "/"; false for a malformed
// escape. Config reads route patterns with it too, so that what validate
// says of a pattern is what a request meets. It allocates only when p
// changes.
func NormalizePath(p string, mergeSlashes bool) (string, bool) {
	i := 0
	for ; i < len(p); i++ {
		c := p[i]
		if c == '%' {
			if i+2 >= len(p) || !IsHex(p[i+1]) || !IsHex(p[i+2]) {
				return "", false
			}
			if IsUnreserved(Unhex(p[i+1])<<4|Unhex(p[i+2])) || isLowerHex(p[i+1]) || isLowerHex(p[i+2]) {
				break
			}
			i += 2
			continue
		}
		if !PathByte(c) || c == '/' && mergeSlashes && i+1 < len(p) && p[i+1] == '/' {
			break
		}
	}
	if i == len(p) {
		return orRoot(p), true
	}
	b := make([]byte, i, len(p)+16)
	copy(b, p[:i])
	for ; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '%':
			if i+2 >= len(p) || !IsHex(p[i+1]) || !IsHex(p[i+2]) {
				return "", false
			}
			if d := Unhex(p[i+1])<<4 | Unhex(p[i+2]); IsUnreserved(d) {
				b = append(b, d)
			} else {
				b = append(b, '%', upperHex[d>>4], upperHex[d&15])
			}
			i += 2
		case c == '/' && mergeSlashes && len(b) > 0 && b[len(b)-1] == '/':
			// merged into the one before
		case !PathByte(c):
			b = append(b, '%', upperHex[c>>4], upperHex[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(b), true
}

const upperHex = "0123456789ABCDEF"

func isLowerHex(c byte) bool { return 'a' <= c && c <= 'f' }

// NormalizePattern normalizes the literal parts of a chi pattern as
// NormalizePath does a path, leaving its {param} and {param:regexp} parts
// as they are; a pattern with nothing to change is returned as is.
func NormalizePattern(p string, mergeSlashes bool) string {
	var b strings.Builder
	lit := 0 // start of the literal part being read
	flush := func(end int) {
		if n, ok := NormalizePath(p[lit:end], mergeSlashes); ok {
			b.WriteString(n)
		} else {
			b.WriteString(p[lit:end])
		}
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '{' {
			continue
		}
		end, depth := len(p), 0
		for j := i; j < len(p); j++ {
			if p[j] == '{' {
				depth++
			} else if p[j] == '}' {
				if depth--; depth == 0 {
					end = j + 1
					break
				}
			}
		}
		if i > lit {
			flush(i)
		}
		b.WriteString(p[i:end])
		lit, i = end, end-1
	}
	if lit < len(p) {
		flush(len(p))
	}
	if b.String() == p {
		return p
	}
	return b.String()
}

// IsUnreserved reports RFC 3986's unreserved characters: their escapes
// mean the character itself (RFC 3986 6.2.2.2).
func IsUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// PathByte reports a byte an escaped path may hold raw, as
// url.URL.EscapedPath accepts it: unreserved, sub-delims, ':', '@', '/',
// '%', and '[' ']' (which Go keeps). Anything else (non-ASCII, '"', '<',
// '\\', '{', ...) is escaped, as the upstream leg would write it anyway.
func PathByte(c byte) bool {
	if IsUnreserved(c) {
		return true
	}
	switch c {
	case '/', '%', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '@', '[', ']':
		return true
	}
	return false
}

// Unhex is the value of the hex digit c (IsHex).
func Unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// IsHex reports a hex digit, of either case.
func IsHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}
