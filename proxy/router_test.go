package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRouting pins what each request reaches: method-specific routes,
// routes without `methods:`, path parameters read by a hot-param rule, escaped
// paths, and the gateway's own 404 and 405 answers.
func TestRouting(t *testing.T) {
	upstream := func(name string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s %s", name, r.Method, r.URL.EscapedPath())
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	rules := fmt.Sprintf(`
upstreams:
  reads:  {targets: [%q]}
  writes: {targets: [%q]}
  items:  {targets: [%q]}
routes:
  - path: /orders
    methods: [get, HEAD]
    upstream: reads
  - path: /orders
    methods: [POST]
    upstream: writes
  - path: /items/{id}
    upstream: items
    resource: items
  - path: /files/*
    upstream: items
paramRules:
  - resource: items
    param: path:id
    count: 1
`, upstream("reads"), upstream("writes"), upstream("items"))
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			base := parityGateway(t, fwd, rules)
			cases := []struct {
				method, path string
				status       int
				body         string // prefix of the answer
			}{
				{"GET", "/orders", 200, "reads GET /orders"},
				{"HEAD", "/orders", 200, ""},
				{"POST", "/orders", 200, "writes POST /orders"},
				{"DELETE", "/orders", 405, `{"error":"method not allowed"}`},
				{"PURGE", "/orders", 405, `{"error":"method not allowed"}`},
				{"GET", "/items/1", 200, "items GET /items/1"},
				{"DELETE", "/items/2", 200, "items DELETE /items/2"},
				// The path parameter is what the param rule counts: id 1
				// used its one pass above, id 3 has its own.
				{"GET", "/items/1", 429, ""},
				{"GET", "/items/3", 200, "items GET /items/3"},
				{"GET", "/items/a%2Fb", 200, "items GET /items/a%2Fb"},
				{"GET", "/items/a%2Fb", 429, ""},
				// An escaped id is the id the upstream decodes: %33 is 3,
				// %2f is %2F.
				{"GET", "/items/%33", 429, ""},
				{"GET", "/items/a%2fb", 429, ""},
				{"GET", "/files/x/y.txt", 200, "items GET /files/x/y.txt"},
				// Methods chi does not know reach routes that take every
				// method; elsewhere they get 405 on a known path, 404 on
				// an unknown one.
				{"PROPFIND", "/files/x", 200, "items PROPFIND /files/x"},
				{"PURGE", "/items/9", 200, "items PURGE /items/9"},
				{"PURGE", "/nowhere", 404, `{"error":"no route"}`},
				{"GET", "/items", 404, `{"error":"no route"}`},
				{"GET", "/nowhere", 404, `{"error":"no route"}`},
			}
			for _, c := range cases {
				req, err := http.NewRequest(c.method, base+c.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.status || !strings.HasPrefix(string(b), c.body) {
					t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, resp.StatusCode, b, c.status, c.body)
				}
			}
		})
	}
}

// TestStaticBeforeParams pins precedence where static paths are looked up
// in a map before chi's tree: a static pattern serves only the methods it
// took, and the same path under another method falls to a parameter
// pattern (HEAD included, from its GET); a route taking every method
// takes unknown methods on its static path.
func TestStaticBeforeParams(t *testing.T) {
	var targets []any
	for _, name := range []string{"param", "me", "me2", "all"} {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s", name, r.Method)
		}))
		t.Cleanup(s.Close)
		targets = append(targets, s.URL)
	}
	rules := fmt.Sprintf(`
upstreams:
  param: {targets: [%q]}
  me:    {targets: [%q]}
  me2:   {targets: [%q]}
  all:   {targets: [%q]}
routes:
  - {path: "/users/{id}", methods: [GET], upstream: param}
  - {path: /users/me, methods: [POST], upstream: me}
  - {path: /users/me, methods: [PUT], upstream: me2}
  - {path: /all, upstream: all}
`, targets...)
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			base := parityGateway(t, fwd, rules)
			for _, c := range []struct {
				method, path string
				status       int
				body         string
			}{
				{"GET", "/users/me", 200, "param GET"},
				{"HEAD", "/users/me", 200, ""},
				{"POST", "/users/me", 200, "me POST"},
				{"PUT", "/users/me", 200, "me2 PUT"},
				{"DELETE", "/users/me", 405, `{"error":"method not allowed"}`},
				{"GET", "/users/7", 200, "param GET"},
				{"GET", "/all", 200, "all GET"},
				{"PROPFIND", "/all", 200, "all PROPFIND"},
				{"GET", "/all/", 404, `{"error":"no route"}`},
			} {
				req, err := http.NewRequest(c.method, base+c.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.status || !strings.HasPrefix(string(b), c.body) {
					t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, resp.StatusCode, b, c.status, c.body)
				}
			}
		})
	}
}

// TestMethodNotAllowedListsAllow: a 405 names, in Allow, every method some
// route serves on the path (RFC 9110 15.5.6: a 405 must), HEAD where a
// route has GET; for a request whose host has routes, those of its host and
// those of any host together, as either would serve it. Before, a 405 had
// no Allow at all.
func TestMethodNotAllowedListsAllow(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(up.Close)
	rules := fmt.Sprintf(`
upstreams:
  app: {targets: [%q]}
routes:
  - {path: /orders, methods: [GET], upstream: app}
  - {path: /orders, methods: [POST], upstream: app}
  - {path: "/users/{id}", methods: [PUT], upstream: app}
  - {path: /x, methods: [GET], hosts: [a.test], upstream: app}
  - {path: /y, methods: [DELETE], hosts: ["*.test"], upstream: app}
  - {path: /x, methods: [POST], upstream: app}
`, up.URL)
	for _, fwd := range []string{"standard", "fast"} {
		t.Run(fwd, func(t *testing.T) {
			base := parityGateway(t, fwd, rules)
			for _, c := range []struct {
				method, host, path string
				status             int
				allow              string
			}{
				{"DELETE", "", "/orders", 405, "GET, HEAD, POST"},
				{"PURGE", "", "/orders", 405, "GET, HEAD, POST"},
				{"GET", "", "/users/7", 405, "PUT"},
				{"PUT", "a.test", "/x", 405, "GET, HEAD, POST"},
				{"PUT", "b.test", "/x", 405, "POST"},
				{"PUT", "a.test", "/y", 405, "DELETE"},
				{"PUT", "other.example", "/y", 404, ""},
				{"GET", "", "/nowhere", 404, ""},
			} {
				req, err := http.NewRequest(c.method, base+c.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Host = c.host
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if got := resp.Header.Get("Allow"); resp.StatusCode != c.status || got != c.allow {
					t.Errorf("%s %s%s: %d, Allow %q; want %d, Allow %q", c.method, c.host, c.path, resp.StatusCode, got, c.status, c.allow)
				}
			}
		})
	}
}
