package proxy

import (
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"

	"sluice/config"
	"sluice/internal/match"
)

// hostRouter routes by Host, then path and method (docs/edge.md, "Virtual
// hosts"). The routes whose `hosts` match a request are tried before the
// routes without `hosts`; among either, the file's order holds. Routes
// with hosts are grouped by the host names the file mentions, each group a
// router holding, in file order, every route that a request for that name
// matches: so one map lookup finds all of them, wildcards included.
type hostRouter struct {
	any   *router            // routes without hosts
	exact map[string]*router // a host -> the routes matching it, its wildcards' included
	wild  map[string]*router // "example.com" (from *.example.com) -> the routes of that and every wider wildcard
	ctxs  sync.Pool          // *chi.Context
}

// hostRoute is one configured route waiting for the groups to be built.
type hostRoute struct {
	rc *config.Route
	rt *route
}

func newHostRouter(routes []hostRoute, mergeSlashes bool) *hostRouter {
	h := &hostRouter{any: newRouter()}
	// Patterns are matched against the view's path, so their literal
	// parts are normalized alike: `path: /café` matches /caf%C3%A9 (and
	// /café, which the view escapes).
	routes = slices.Clone(routes)
	for i := range routes {
		rc := *routes[i].rc
		rc.Path = match.NormalizePattern(rc.Path, mergeSlashes)
		routes[i].rc = &rc
	}
	exact, wild := map[string]bool{}, map[string]bool{}
	for _, r := range routes {
		if len(r.rc.Hosts) == 0 {
			h.any.handle(r.rc.Path, r.rc.Methods, r.rt)
		}
		for _, host := range r.rc.Hosts {
			if s, ok := strings.CutPrefix(host, "*."); ok {
				wild[s] = true
			} else {
				exact[host] = true
			}
		}
	}
	h.any.finish()
	group := func(matches func(host string) bool) *router {
		g := newRouter()
		for _, r := range routes {
			for _, host := range r.rc.Hosts {
				if matches(host) {
					g.handle(r.rc.Path, r.rc.Methods, r.rt)
					break
				}
			}
		}
		g.finish()
		return g
	}
	if len(exact) > 0 {
		h.exact = map[string]*router{}
		for name := range exact {
			h.exact[name] = group(func(host string) bool { return host == name || wildcardMatches(host, name) })
		}
	}
	if len(wild) > 0 {
		h.wild = map[string]*router{}
		for suffix := range wild {
			// Any name under *.suffix is also under every wider wildcard.
			h.wild[suffix] = group(func(host string) bool { return host == "*."+suffix || wildcardMatches(host, suffix) })
		}
	}
	// A request's Host is often none of them (an address, a name the
	// routes do not list): a miss, cheap only in a roomy map.
	h.exact, h.wild = roomy(h.exact), roomy(h.wild)
	return h
}

// wildcardMatches reports whether pattern is "*.S" and name ends in ".S".
func wildcardMatches(pattern, name string) bool {
	s, ok := strings.CutPrefix(pattern, "*.")
	return ok && strings.HasSuffix(name, "."+s)
}

// serve routes r by its Host and its view's path (readTarget), and serves
// it with the route found. It returns the status of its own answer when no
// route took r (404, 405), else 0.
func (h *hostRouter) serve(w http.ResponseWriter, r *http.Request, v view) (missed int) {
	rctx, _ := h.ctxs.Get().(*chi.Context)
	if rctx == nil {
		rctx = chi.NewRouteContext()
	}
	rctx.Reset()
	if rt, g := h.find(rctx, r.Host, r.Method, v.path); rt != nil {
		rt.serve(w, r, v, rctx)
	} else {
		missed = h.miss(w, r, rctx, g, v.path)
	}
	h.ctxs.Put(rctx)
	return missed
}

// miss answers a request no route takes, and returns the status: 405 when
// a route for its host (g, nil: none) or for any host has the path under
// another method, with Allow naming every such method (RFC 9110 15.5.6:
// find tries both), else 404.
func (h *hostRouter) miss(w http.ResponseWriter, r *http.Request, rctx *chi.Context, g *router, path string) int {
	var allow []string
	if g != nil {
		allow = g.allow(allow, rctx, path)
	}
	if allow = h.any.allow(allow, rctx, path); len(allow) == 0 {
		notFound(w, r)
		return http.StatusNotFound
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	notAllowed(w, r)
	return http.StatusMethodNotAllowed
}

// find returns the route serving method on path for host (nil: none),
// its path parameters left in rctx, and the group of routes for host (nil:
// none).
func (h *hostRouter) find(rctx *chi.Context, host, method, path string) (*route, *router) {
	var g *router
	if h.exact != nil || h.wild != nil {
		if g = h.group(host); g != nil {
			if rt := g.match(rctx, method, path); rt != nil {
				return rt, g
			}
			rctx.Reset()
		}
	}
	return h.any.match(rctx, method, path), g
}

// group finds the routes for a Host header: port ignored, case-insensitive,
// trailing dot dropped; the exact name first, then the most specific
// wildcard (whose group holds the wider ones too). It allocates nothing.
func (h *hostRouter) group(host string) *router {
	if host == "" {
		return nil
	}
	if host[0] == '[' { // an IPv6 literal: [::1]:8080
		if i := strings.IndexByte(host, ']'); i > 0 {
			host = host[:i+1]
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	var buf [256]byte
	if len(host) > len(buf) {
		return nil // longer than any DNS name
	}
	name := buf[:len(host)]
	for i := 0; i < len(host); i++ {
		c := host[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		name[i] = c
	}
	if g := h.exact[string(name)]; g != nil {
		return g
	}
	dot := -1 // the dot before the label being read
	for i, c := range name {
		if c != '.' {
			continue
		}
		if i == dot+1 {
			// An empty label (".example.com", "a..example.com"): a
			// wildcard stands for one or more labels, and "" is none.
			return nil
		}
		dot = i
		if g := h.wild[string(name[i+1:])]; g != nil {
			return g
		}
	}
	return nil
}
