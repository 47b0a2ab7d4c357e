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
	routes map[routeKey]*route
	ctxs   sync.Pool // *chi.Context
}

// routeKey is a method and the chi pattern it was registered on.
type routeKey struct{ method, pattern string }

func newRouter(notFound, notAllowed http.HandlerFunc) *router {
	mux := chi.NewRouter()
	mux.NotFound(notFound)
	mux.MethodNotAllowed(notAllowed)
	return &router{mux: mux, routes: map[routeKey]*route{}}
}

// handle registers rt on pattern for methods, which config has already
// upper-cased and filled in (every method when the file lists none). chi
// panics on a pattern it cannot take; the snapshot builder recovers.
func (rr *router) handle(pattern string, methods []string, rt *route) {
	for _, m := range methods {
		rr.mux.Method(m, pattern, rt)
		rr.routes[routeKey{m, pattern}] = rt
	}
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
	} else {
		rr.mux.ServeHTTP(w, r)
	}
	rr.ctxs.Put(rctx)
}
