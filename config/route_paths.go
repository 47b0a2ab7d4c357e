package config

import (
	"strings"
)

// unmatchable says why a route pattern's literal text (its parameters
// written NUL, which no check below reads) can match no request's
// normalized path (SPEC §11), or "": such a route validated and started,
// and its limits never saw a call. A route's '//' and escaped unreserved characters are normalized as a
// request's path is (proxy's normalizePattern), so those do match.
func unmatchable(text string) string {
	switch {
	case strings.IndexByte(text, '?') >= 0:
		return "holds a '?', which a request's path never does: the query is not part of the path (limit a query parameter with a param rule on query:NAME)"
	case strings.IndexByte(text, '#') >= 0:
		return "holds a '#', which a request's path never does (a fragment is refused, 400)"
	}
	for seg := range strings.SplitSeq(text, "/") {
		// %2E is a '.' once normalized, as in a request's path.
		if d := strings.ReplaceAll(strings.ReplaceAll(seg, "%2e", "."), "%2E", "."); d == "." || d == ".." {
			return "holds a dot segment (" + quote(seg) + "), which a request's path may not hold (400)"
		}
	}
	return ""
}
