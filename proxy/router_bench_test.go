package proxy

import (
	"fmt"
	"testing"

	"github.com/go-chi/chi/v5"

	"sluice/config"
)

// BenchmarkRouteMatch measures finding the route of a request (Host, then
// method and path) among 10, 1,000 and 10,000 routes: nine in ten static
// (/svcN/health, /svcN/orders), one in ten with a parameter
// (/svcN/orders/{id}), and one in twenty for a host. A static path is a map
// lookup, and a parameter path chi's walk of the small tree of its first
// segment (patternTrees), so both stay flat as routes grow.
func BenchmarkRouteMatch(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		h, static, param := benchRouter(n)
		for _, c := range []struct {
			name  string
			paths []string
		}{{"static", static}, {"param", param}} {
			b.Run(fmt.Sprintf("%s/routes=%d", c.name, n), func(b *testing.B) {
				rctx := chi.NewRouteContext()
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					rctx.Reset()
					if rt, _ := h.find(rctx, "api.example.com", "GET", c.paths[i%len(c.paths)]); rt == nil {
						b.Fatal("no route")
					}
				}
			})
		}
	}
}

// benchRouter builds n routes and returns, for requests spread over them,
// static paths and parameter paths that each match one.
func benchRouter(n int) (h *hostRouter, static, param []string) {
	var routes []hostRoute
	for i := 0; len(routes) < n; i++ {
		var rc config.Route
		switch {
		case i%10 == 9:
			rc = config.Route{Path: fmt.Sprintf("/svc%d/orders/{id}", i), Methods: []string{"GET", "POST"}}
		case i%20 == 3:
			rc = config.Route{Path: fmt.Sprintf("/svc%d/health", i), Methods: config.RouteMethods(), Hosts: []string{"api.example.com"}}
		case i%2 == 0:
			rc = config.Route{Path: fmt.Sprintf("/svc%d/health", i), Methods: config.RouteMethods()}
		default:
			rc = config.Route{Path: fmt.Sprintf("/svc%d/orders", i), Methods: []string{"GET"}}
		}
		routes = append(routes, hostRoute{&rc, &route{resource: rc.Path}})
	}
	for i := 0; i < 16; i++ {
		k := i * len(routes) / 16
		for ; k < len(routes); k++ {
			if p := routes[k].rc.Path; isStatic(p) {
				static = append(static, p)
				break
			}
		}
		for k = i * len(routes) / 16; k < len(routes); k++ {
			if p := routes[k].rc.Path; !isStatic(p) {
				param = append(param, p[:len(p)-len("{id}")]+fmt.Sprint(1000+i))
				break
			}
		}
	}
	return newHostRouter(routes, false), static, param
}
