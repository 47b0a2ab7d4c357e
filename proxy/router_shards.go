package proxy

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// patternTrees finds a pattern with parameters in a small chi tree, so
// its cost does not grow with the number of routes. chi's radix tree walks
// one node per byte where patterns branch: among thousands of patterns
// such as /svcN/orders/{id}, finding one walked the digits of N through
// nodes of up to ten edges each, and at 10,000 routes a parameter path cost
// half as much again as at 10 (BenchmarkRouteMatch).
//
// A pattern whose first segment is spelled out (no parameter, no
// wildcard) goes to the tree of that segment (firstSegment, as API groups
// index their paths); every other one to rest. The router keeps no tree
// of every pattern beside them (which methods a path has is asked of these
// trees too, router.serves): a gateway of 10,000 routes /rN/items/{id}
// holds 95 MB of heap with them, 92 MB with the one tree it had
// (TestLoadTenThousandRoutes). Trees of 16 first segments each held 92 MB
// too, but walked the segments' common prefixes as the one tree did (210
// ns a parameter path at 10,000 routes, 140 at 10).
type patternTrees struct {
	first map[string]*chi.Mux // by the first segment, spelled out: /svc/
	rest  *chi.Mux            // nil: none
}

// add registers pattern, which has a parameter or a wildcard, for method.
func (p *patternTrees) add(method, pattern string) {
	var t *chi.Mux
	if seg, ok := spelledFirstSegment(pattern); ok {
		if p.first == nil {
			p.first = map[string]*chi.Mux{}
		}
		if t = p.first[seg]; t == nil {
			t = chi.NewRouter()
			p.first[seg] = t
		}
	} else {
		if p.rest == nil {
			p.rest = chi.NewRouter()
		}
		t = p.rest
	}
	t.Method(method, pattern, http.HandlerFunc(findOnly))
}

// empty reports whether no pattern was added: find would return "".
func (p *patternTrees) empty() bool { return p.first == nil && p.rest == nil }

// find returns the pattern matching method and path ("": none), its path
// parameters left in rctx.
func (p *patternTrees) find(rctx *chi.Context, method, path string) string {
	if t := p.first[firstSegment(path)]; t != nil {
		if pattern := t.Find(rctx, method, path); pattern != "" {
			return pattern
		}
		rctx.Reset()
	}
	if p.rest == nil {
		return ""
	}
	return p.rest.Find(rctx, method, path)
}

// spelledFirstSegment returns the first segment of pattern, its slashes
// included (firstSegment), when it is spelled out and the pattern goes on
// after it: /svc/orders/{id} gives /svc/; /{tenant}/x, /v{n}/x, /svc* and
// /{id} give none.
func spelledFirstSegment(pattern string) (string, bool) {
	seg := firstSegment(pattern)
	if len(seg) < 2 || seg[0] != '/' || seg[len(seg)-1] != '/' || strings.ContainsAny(seg, "{*") {
		return "", false
	}
	return seg, true
}
