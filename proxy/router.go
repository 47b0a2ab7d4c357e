package proxy

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"sluice/config"
)

// router matches with chi's tree and calls the matched route directly.
// chi's own ServeHTTP copies the request (WithContext), adds a context
// value and sets http.Request path values: four allocations and a 250-byte
// request copy per request, for state only sluice reads. Here the route is
// handed chi's routing context (its path parameters) instead, and what
// Find does not resolve to a route is answered 404 or 405 (hostRouter.miss).
//
// Static patterns (no {param}, no *) are also kept in a map by method and
// path, looked up before chi's tree: with thousands of routes a static
// path costs one map lookup whatever their number, and a router whose
// patterns are all static (a host's, often) never asks chi. chi tries a node's
// static edges before its parameters, so where a static pattern has the
// path under the method chi would find that route too; everything else
// (a parameter, a catch-all) is chi's Find to decide, in the small tree of
// the path's first segment (patternTrees).
type router struct {
	// tree holds the patterns that are not static.
	tree patternTrees
	// routes and static are by method, in the order of methods (a struct
	// key would be hashed whole at every request): routes by chi pattern,
	// static the patterns that are a path.
	routes []map[string]*route
	static []map[string]*route
	taken  map[routeKey]bool // (method, config.PatternKey): the first route there wins

	// chi knows only the methods a route may list (config.RouteMethods).
	// Routes that take all of them are also kept in a second tree, under
	// GET, for the methods chi does not know (WebDAV's PROPFIND, PURGE,
	// ...), which nginx and Traefik proxy.
	methods   []string
	anyTree   patternTrees      // anyRoutes' patterns that are not static
	anyRoutes map[string]*route // by pattern
	anyStatic map[string]*route // anyRoutes' static patterns, by path

	// gets are the routes that took GET on their pattern: finish gives
	// each HEAD there too, unless a route lists HEAD itself.
	gets []pendingHead
}

type pendingHead struct {
	pattern, key string
	rt           *route
}

// routeKey is a method and the chi pattern it was registered on.
type routeKey struct{ method, pattern string }

// findOnly is what chi's trees hold for every pattern: they are asked only
// to Find one (match, allow), and never serve.
func findOnly(http.ResponseWriter, *http.Request) {}

func newRouter() *router {
	rr := &router{taken: map[routeKey]bool{},
		methods: config.RouteMethods(), anyRoutes: map[string]*route{},
		anyStatic: map[string]*route{}}
	for range rr.methods {
		rr.routes = append(rr.routes, map[string]*route{})
		rr.static = append(rr.static, map[string]*route{})
	}
	return rr
}

// isStatic reports whether a pattern matches only the path spelled as it.
func isStatic(pattern string) bool { return !strings.ContainsAny(pattern, "{*") }

// set records rt as the route for method (one of rr.methods: config
// checked the routes' methods) on pattern.
func (rr *router) set(method, pattern string, rt *route) {
	m := slices.Index(rr.methods, method)
	rr.routes[m][pattern] = rt
	if isStatic(pattern) {
		rr.static[m][pattern] = rt
	} else {
		rr.tree.add(method, pattern)
	}
}

// handle registers rt on pattern for methods, which config has already
// upper-cased and filled in (every method when the file lists none). A
// method an earlier route already serves on the same pattern stays with
// that route (chi would let the later one replace it). chi panics on a
// pattern it cannot take; the snapshot builder recovers.
func (rr *router) handle(pattern string, methods []string, rt *route) {
	key := config.PatternKey(pattern)
	for _, m := range methods {
		if rr.taken[routeKey{m, key}] {
			continue
		}
		rr.taken[routeKey{m, key}] = true
		rr.set(m, pattern, rt)
		if m == http.MethodGet {
			rr.gets = append(rr.gets, pendingHead{pattern, key, rt})
		}
	}
	for _, m := range rr.methods {
		if !slices.Contains(methods, m) {
			return
		}
	}
	if rr.taken[routeKey{"", key}] {
		return
	}
	rr.taken[routeKey{"", key}] = true
	rr.anyRoutes[pattern] = rt
	if isStatic(pattern) {
		rr.anyStatic[pattern] = rt
	} else {
		rr.anyTree.add(http.MethodGet, pattern)
	}
}

// finish runs once every route is handled: HEAD on a pattern that no
// route lists HEAD for is served by the route that has GET there, as Go's
// ServeMux does, and counted on its resource. A route listing HEAD itself,
// before or after, keeps it. Then the maps a request looks in get room
// (roomy).
func (rr *router) finish() {
	for _, p := range rr.gets {
		if rr.taken[routeKey{http.MethodHead, p.key}] {
			continue
		}
		rr.taken[routeKey{http.MethodHead, p.key}] = true
		rr.set(http.MethodHead, p.pattern, p.rt)
	}
	rr.gets = nil
	for m := range rr.methods {
		rr.static[m], rr.routes[m] = roomy(rr.static[m]), roomy(rr.routes[m])
	}
	rr.anyStatic, rr.anyRoutes = roomy(rr.anyStatic), roomy(rr.anyRoutes)
	rr.tree.first, rr.anyTree.first = roomy(rr.tree.first), roomy(rr.anyTree.first)
}

// roomy copies a map a request looks in to one at most half full. Go's
// maps fill to 7/8 before they grow, and a lookup probes groups of slots
// until it finds its key or a free slot: a miss (every path with a
// parameter misses the static paths) in a map near 7/8 probes several.
// BenchmarkRouteMatch measured it: a parameter path cost 158 ns among
// 1,000 routes (900 static paths in a map of 1,024 slots) against 120
// among 10.
func roomy[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	r := make(map[K]V, 2*len(m))
	maps.Copy(r, m)
	return r
}

// match returns the route serving method on path (nil: none), leaving
// its path parameters in rctx. A static path is one map lookup.
func (rr *router) match(rctx *chi.Context, method, path string) *route {
	if m := slices.Index(rr.methods, method); m >= 0 {
		if rt := rr.static[m][path]; rt != nil || rr.tree.empty() {
			return rt
		}
		return rr.routes[m][rr.tree.find(rctx, method, path)]
	}
	// A method chi does not know reaches a route that takes every method.
	if rt := rr.anyStatic[path]; rt != nil || rr.anyTree.empty() {
		return rt
	}
	rctx.Reset()
	return rr.anyRoutes[rr.anyTree.find(rctx, http.MethodGet, path)]
}

// allow appends to dst, once each, the methods some route of rr serves on
// path (HEAD where a route has GET).
func (rr *router) allow(dst []string, rctx *chi.Context, path string) []string {
	for m, method := range rr.methods {
		rctx.Reset()
		if !slices.Contains(dst, method) && rr.serves(rctx, m, path) {
			dst = append(dst, method)
		}
	}
	return dst
}

// serves reports whether a route of rr serves rr.methods[m] on path.
func (rr *router) serves(rctx *chi.Context, m int, path string) bool {
	return rr.static[m][path] != nil || !rr.tree.empty() && rr.tree.find(rctx, rr.methods[m], path) != ""
}
