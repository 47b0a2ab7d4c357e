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

// A limit on header:Authorization holds one caller to one budget however
// the credentials are spelt: the scheme in any case, spaces after it,
// Basic's base64 unpadded or with its leftover bits set are the same user
// to Go's BasicAuth, Werkzeug and Express (the audit of 2026-12-07 had four
// passes of a count of 1 from Basic, basic, BASIC and bAsic).
func TestCredentialSpellingsShareOneLimit(t *testing.T) {
	const rules = `
upstreams:
  up: {targets: ["http://upstream.invalid"]}
routes:
  - {path: /v1/chat, upstream: up, resource: chat}
paramRules:
  - {resource: chat, param: "header:Authorization", count: 1, durationSec: 600}
`
	g, _, _ := stubGateway(t, rules, nil)
	for _, spellings := range [][]string{
		{"Basic YWxpY2U6cHc=", "basic YWxpY2U6cHc=", "BASIC YWxpY2U6cHc=", "bAsic  YWxpY2U6cHc=", "Basic YWxpY2U6cHc", "Basic YWxpY2U6cHd="},
		{"Bearer sk-X", "bearer sk-X", "BEARER sk-X", "Bearer  sk-X", "bearer \tsk-X"},
	} {
		for i, a := range spellings {
			r := httptest.NewRequest("GET", "/v1/chat", nil)
			r.Header.Set("Authorization", a)
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if want := map[bool]int{true: 200, false: 429}[i == 0]; w.Code != want {
				t.Errorf("Authorization %q after %q: %d, want %d", a, spellings[:i], w.Code, want)
			}
		}
	}
	// Another credential has its own budget.
	r := httptest.NewRequest("GET", "/v1/chat", nil)
	r.Header.Set("Authorization", "Bearer sk-Y")
	w := httptest.NewRecorder()
	if g.ServeHTTP(w, r); w.Code != 200 {
		t.Errorf("another token: %d, want 200", w.Code)
	}
}
