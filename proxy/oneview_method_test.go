package proxy_test

import (
	"fmt"
	"net/http/httptest"
	"testing"
)

// A standard method in another case ("get") is 400: chi knows only "GET",
// so it missed the route of methods: [GET] and its limit and was served by
// a route taking every method, while Django, Flask, Symfony and ASP.NET
// upper-case the method and served the limited endpoint. Methods that are
// not standard pass in any case, as before.
func TestFoldedMethodIsRefused(t *testing.T) {
	g, _, _ := stubGateway(t, fmt.Sprintf(methodRules, "http://upstream.invalid"), nil)
	for i, st := range []struct {
		method string
		status int
	}{
		{"GET", 200},
		{"GET", 429},
		{"get", 400},
		{"Get", 400},
		{"head", 400},
		{"HEAD", 429},
		{"pOST", 400},
		{"options", 400},
		{"PROPFIND", 200}, // not standard: the route taking every method
		{"propfind", 200},
		{"GETX", 200},
	} {
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest(st.method, "/item/x", nil))
		if w.Code != st.status {
			t.Errorf("step %d: %s /item/x: %d, want %d", i, st.method, w.Code, st.status)
		}
	}
}

// methodRules route /item/{id} for GET only, with a count of 1 a minute,
// and any other path or method to a route of 3 a minute, on the upstream
// %q.
const methodRules = `
upstreams:
  up: {targets: [%q]}
routes:
  - path: /item/{id}
    methods: [GET]
    upstream: up
    resource: item
  - path: /*
    upstream: up
    resource: any
flowRules:
  - resource: item
    count: 1
    statIntervalMs: 60000
  - resource: any
    count: 3
    statIntervalMs: 60000
`
