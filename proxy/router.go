package proxy

import (
	"net/http"
	"sync"

	"github.com/go-chi/chi/v5"
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
	routes map[string]methodRoutes // by chi pattern
	ctxs   sync.Pool               // *chi.Context
}

// methodRoutes are the routes registered on one path pattern.
type methodRoutes struct {
	any      *route            // registered for every method (no `methods:`)
	byMethod map[string]*route // registered for listed methods
}

func newRouter(notFound, notAllowed http.HandlerFunc) *router {
	mux := chi.NewRouter()
	mux.NotFound(notFound)
	mux.MethodNotAllowed(notAllowed)
	return &router{mux: mux, routes: map[string]methodRoutes{}}
}

// handle registers rt on pattern for methods (none: every method). chi
// panics on a pattern it cannot take; the snapshot builder recovers.
func (rr *router) handle(pattern string, methods []string, rt *route) {
	mr := rr.routes[pattern]
	if len(methods) == 0 {
		// chi's every-method registration replaces each method's handler
		// (config validation refuses such overlaps; mirror chi anyway).
		rr.mux.Handle(pattern, rt)
		mr = methodRoutes{any: rt}
	}
	for _, m := range methods {
		rr.mux.Method(m, pattern, rt)
		if mr.byMethod == nil {
			mr.byMethod = map[string]*route{}
		}
		mr.byMethod[m] = rt
	}
	rr.routes[pattern] = mr
}

func (rr *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rctx, _ := rr.ctxs.Get().(*chi.Context)
	if rctx == nil {
		rctx = chi.NewRouteContext()
	}
	rctx.Reset()
	rctx.Routes = rr.mux
	// The path chi's routeHTTP matches on.
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	if path == "" {
		path = "/"
	}
	if rt := rr.match(rctx, r.Method, path); rt != nil {
		rt.serve(w, r, rctx)
	} else {
		rr.mux.ServeHTTP(w, r)
	}
	rr.ctxs.Put(rctx)
}

func (rr *router) match(rctx *chi.Context, method, path string) *route {
	pattern := rr.mux.Find(rctx, method, path)
	if pattern == "" {
		return nil
	}
	mr, ok := rr.routes[pattern]
	if !ok {
		return nil
	}
	if rt := mr.byMethod[method]; rt != nil {
		return rt
	}
	return mr.any
}
