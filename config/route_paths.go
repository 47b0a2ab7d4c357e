package config

import (
	"strings"

	"sluice/internal/match"
)

// unmatchable says why a route pattern's literal text (its parameters
// written NUL, which no check below reads) can match no request's
// normalized path (SPEC §11), or "": such a route validated and started,
// and its limits never saw a call. A route's '//' and escaped unreserved characters are normalized as a
// request's path is (match.NormalizePattern), so those do match.
func unmatchable(text string) string {
	switch {
	case strings.IndexByte(text, '?') >= 0:
		return "holds a '?', which a request's path never does: the query is not part of the path (limit a query parameter with a param rule on query:NAME)"
	case strings.IndexByte(text, '#') >= 0:
		return "holds a '#', which a request's path never does (a fragment is refused, 400)"
	}
	// Read as a request's path is (an escaped dot, %2e, is a dot), by the
	// one normalizer both use; without merging, a segment stays one
	// segment, so the message names it as written.
	norm, ok := match.NormalizePath(text, false)
	if !ok {
		norm = text
	}
	written := strings.Split(text, "/")
	for i, seg := range strings.Split(norm, "/") {
		if seg == "." || seg == ".." {
			return "holds a dot segment (" + quote(written[i]) + "), which a request's path may not hold (400)"
		}
	}
	return ""
}
