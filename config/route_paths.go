package config

import (
	"strings"
)

// unmatchable says why a route pattern's literal text (its parameters
// written NUL, which no check below reads) can match no request's
// normalized path (SPEC §11), or "": such a route validated and started,
// and its limits never saw a call.
func unmatchable(text string, mergeSlashes bool) string {
	switch {
	case strings.IndexByte(text, '?') >= 0:
		return "holds a '?', which a request's path never does: the query is not part of the path (limit a query parameter with a param rule on query:NAME)"
	case strings.IndexByte(text, '#') >= 0:
		return "holds a '#', which a request's path never does (a fragment is refused, 400)"
	case mergeSlashes && strings.Contains(text, "//"):
		return "holds \"//\", which server.mergeSlashes makes one '/' in every request's path"
	}
	for seg := range strings.SplitSeq(text, "/") {
		if seg == "." || seg == ".." {
			return "holds a dot segment (" + quote(seg) + "), which a request's path may not hold (400)"
		}
	}
	for i := 0; i+2 < len(text); i++ {
		if text[i] != '%' || !isHexDigit(text[i+1]) || !isHexDigit(text[i+2]) {
			continue
		}
		if c := hexValue(text[i+1])<<4 | hexValue(text[i+2]); isUnreservedByte(c) {
			return "holds " + quote(text[i:i+3]) + ", an escaped " + quote(string(rune(c))) +
				", which a request's path is matched with decoded: write " + quote(string(rune(c)))
		}
	}
	return ""
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexValue(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// isUnreservedByte reports RFC 3986's unreserved characters, whose escapes
// the normalized path decodes.
func isUnreservedByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
