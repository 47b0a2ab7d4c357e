package proxy

import (
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"sluice/config"
)

// router matches with chi's tree and calls the matched route directly.
// chi's own ServeHTTP copies the request (WithContext), adds a context
// value and sets http.Request path values: four allocations and a 250-byte
// request copy per request, for state only sluice reads. Here the route is
// handed chi's routing context (its path parameters) instead. Whatever
// Find does not resolve to a route — 404, 405, unknown methods — goes to
// chi's ServeHTTP, so those answers are chi's own.
type router struct {
	mux    *chi.Mux
	routes map[routeKey]*route
	taken  map[routeKey]bool // (method, config.PatternKey): the first route there wins

	// chi knows only the methods a route may list (config.RouteMethods).
	// Routes that take all of them are also kept in a second tree, under
	// GET, for the methods chi does not know (WebDAV's PROPFIND, PURGE,
	// ...), which nginx and Traefik proxy.
	methods   []string
	anyMux    *chi.Mux
	anyRoutes map[string]*route // by pattern
	notFound  http.HandlerFunc
}

// routeKey is a method and the chi pattern it was registered on.
type routeKey struct{ method, pattern string }

func newRouter(notFound, notAllowed http.HandlerFunc) *router {
	mux := chi.NewRouter()
	mux.NotFound(notFound)
	mux.MethodNotAllowed(notAllowed)
	return &router{mux: mux, routes: map[routeKey]*route{}, taken: map[routeKey]bool{}, methods: config.RouteMethods(),
		anyMux: chi.NewRouter(), anyRoutes: map[string]*route{}, notFound: notFound}
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
		rr.mux.Method(m, pattern, rt)
		rr.routes[routeKey{m, pattern}] = rt
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
	rr.anyMux.Method(http.MethodGet, pattern, rt)
	rr.anyRoutes[pattern] = rt
}

// match returns the route serving method on path (nil: none), leaving
// its path parameters in rctx.
func (rr *router) match(rctx *chi.Context, method, path string) *route {
	if rt := rr.routes[routeKey{method, rr.mux.Find(rctx, method, path)}]; rt != nil {
		return rt
	}
	if slices.Contains(rr.methods, method) {
		return nil
	}
	// A method chi does not know reaches a route that takes every method.
	rctx.Reset()
	return rr.anyRoutes[rr.anyMux.Find(rctx, http.MethodGet, path)]
}

// knows reports whether some route of rr has path, under any method.
func (rr *router) knows(rctx *chi.Context, path string) bool {
	for _, m := range rr.methods {
		rctx.Reset()
		if rr.mux.Find(rctx, m, path) != "" {
			return true
		}
	}
	return false
}

// miss answers a request no route takes: chi's 405 where a route has the
// path under another method, else 404 (chi itself would answer 405 to any
// path for a method it does not know).
func (rr *router) miss(w http.ResponseWriter, r *http.Request, rctx *chi.Context, path string) {
	if slices.Contains(rr.methods, r.Method) || rr.knows(rctx, path) {
		rr.mux.ServeHTTP(w, r)
		return
	}
	rr.notFound(w, r)
}

// routePath is the path chi's routeHTTP matches on.
func routePath(r *http.Request) string {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	if path == "" {
		path = "/"
	}
	return path
}
