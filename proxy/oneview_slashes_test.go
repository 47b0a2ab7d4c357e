package proxy_test

import (
	"net/http/httptest"
	"testing"
)

// An escaped slash is not a separator (SPEC §11): /items%2FS1 is no path
// of /items/{id} and goes to a route for any path, as sent. A WSGI, gin or
// gorilla/mux upstream decodes it and serves /items/S1 past that route's
// limits; server.encodedSlashes: refuse answers such a path 400 instead,
// before any rule counts it.
func TestEncodedSlashes(t *testing.T) {
	const rules = `
upstreams:
  up: {targets: ["http://upstream.invalid"]}
routes:
  - path: /items/{id}
    upstream: up
    resource: items
  - path: /*
    upstream: up
    resource: any
paramRules:
  - resource: items
    param: path:id
    count: 1
`
	for _, setting := range []string{"", "server: {encodedSlashes: keep}\n", "server: {encodedSlashes: refuse}\n"} {
		g, _, _ := stubGateway(t, setting+rules, nil)
		refuse := setting == "server: {encodedSlashes: refuse}\n"
		slashed := 200
		if refuse {
			slashed = 400
		}
		for i, st := range []struct {
			target string
			status int
		}{
			{"/items/S1", 200},
			{"/items/S1", 429},
			{"/items%2FS1", slashed},
			{"/items%2fS1", slashed},
			{"/items%5CS1", slashed},
			{"/items/a%2Fb", slashed},
			{"/items/S%252F", 200},
			{"/items/S%20", 200},
		} {
			w := httptest.NewRecorder()
			g.ServeHTTP(w, httptest.NewRequest("GET", st.target, nil))
			if w.Code != st.status {
				t.Errorf("%q step %d: GET %s: %d, want %d", setting, i, st.target, w.Code, st.status)
			}
		}
	}
}
