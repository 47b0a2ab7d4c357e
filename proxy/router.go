package proxy

import (
	"net/http"
	"slices"
	"sync"

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
	ctxs   sync.Pool // *chi.Context

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
	return &router{mux: mux, routes: map[routeKey]*route{}, methods: config.RouteMethods(),
		anyMux: chi.NewRouter(), anyRoutes: map[string]*route{}, notFound: notFound}
}

// handle registers rt on pattern for methods, which config has already
// upper-cased and filled in (every method when the file lists none). chi
// panics on a pattern it cannot take; the snapshot builder recovers.
func (rr *router) handle(pattern string, methods []string, rt *route) {
	for _, m := range methods {
		rr.mux.Method(m, pattern, rt)
		rr.routes[routeKey{m, pattern}] = rt
	}
	for _, m := range rr.methods {
		if !slices.Contains(methods, m) {
			return
		}
	}
	rr.anyMux.Method(http.MethodGet, pattern, rt)
	rr.anyRoutes[pattern] = rt
}

func (rr *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rctx, _ := rr.ctxs.Get().(*chi.Context)
	if rctx == nil {
		rctx = chi.NewRouteContext()
	}
	rctx.Reset()
	// The path chi's routeHTTP matches on.
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	if path == "" {
		path = "/"
	}
	if rt := rr.routes[routeKey{r.Method, rr.mux.Find(rctx, r.Method, path)}]; rt != nil {
		rt.serve(w, r, rctx)
	} else if slices.Contains(rr.methods, r.Method) {
		rr.mux.ServeHTTP(w, r)
	} else {
		rr.serveOtherMethod(w, r, rctx, path)
	}
	rr.ctxs.Put(rctx)
}

// serveOtherMethod routes a method chi does not know: to a route that
// takes every method, else 405 where some route has the path, else 404
// (chi itself would answer 405 to any path).
func (rr *router) serveOtherMethod(w http.ResponseWriter, r *http.Request, rctx *chi.Context, path string) {
	rctx.Reset()
	if rt := rr.anyRoutes[rr.anyMux.Find(rctx, http.MethodGet, path)]; rt != nil {
		rt.serve(w, r, rctx)
		return
	}
	for _, m := range rr.methods {
		rctx.Reset()
		if rr.mux.Find(rctx, m, path) != "" {
			rr.mux.ServeHTTP(w, r) // chi's 405
			return
		}
	}
	rr.notFound(w, r)
}
