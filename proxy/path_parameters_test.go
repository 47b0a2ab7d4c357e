package proxy_test

import (
	"fmt"
	"testing"
)

// TestPathParametersRefused: Tomcat, Jetty, Spring and RESTEasy strip a
// ";name=value" path parameter from a segment before routing, so
// /api;x/admin is /api/admin to them, while routes, API groups and
// authority rules here would see another path: a black-listed caller got
// past its authority rule (Istio's AuthorizationPolicy bypass, CVE-2016-9879
// in Spring). By default (server.pathParameters: refuse) a path holding a
// ';', raw or escaped, is 400 before any rule counts it, as Spring
// Security's StrictHttpFirewall answers; with keep it is routed and
// forwarded as it is.
func TestPathParametersRefused(t *testing.T) {
	const doc = `
origin: {from: "header:X-Origin"}
upstreams:
  up: {targets: ["http://upstream.invalid"]}
server: {pathParameters: %s}
routes:
  - { path: "/*", upstream: up, resource: all }
  - { path: "/items/{id}", upstream: up, resource: items }
apiGroups:
  - name: admin
    match: [{ prefix: /api/admin/ }]
authorityRules:
  - { resource: admin, strategy: black, limitApp: batch }
`
	for _, tt := range []struct {
		target      string
		refuse      int // status under refuse (the default)
		keep        int // under keep
		keepBlocked string
	}{
		{"/api/admin/users", 403, 403, "authority"},
		{"/api;x/admin/users", 400, 200, ""}, // keep: the group misses it, and Tomcat serves /api/admin/users
		{"/api/admin;v=1/users", 400, 200, ""},
		{"/api/admin%3Bx/users", 400, 200, ""},
		{"/api/admin%3bx/users", 400, 200, ""},
		{"/items/1;jsessionid=abc", 400, 200, ""},
		{"/api/other", 200, 200, ""},
		{"/api/a%3Ab", 200, 200, ""}, // another escape: served
	} {
		for _, mode := range []string{"refuse", "keep"} {
			g, _, _, _ := grpGateway(t, fmtDoc(doc, mode))
			status, blocked := grpDo(g, "GET", tt.target, "X-Origin", "batch")
			want, wantBlocked := tt.refuse, ""
			if status == 403 {
				wantBlocked = "authority"
			}
			if mode == "keep" {
				want, wantBlocked = tt.keep, tt.keepBlocked
			}
			if status != want || blocked != wantBlocked {
				t.Errorf("%s, pathParameters %s: %d %q, want %d %q", tt.target, mode, status, blocked, want, wantBlocked)
			}
		}
	}
	// Unset is refuse.
	g, _, _, _ := grpGateway(t, `
upstreams:
  up: {targets: ["http://upstream.invalid"]}
routes:
  - { path: "/items/{id}", upstream: up, resource: items }
`)
	if status, _ := grpDo(g, "GET", "/items/1;x"); status != 400 {
		t.Errorf("/items/1;x with server.pathParameters unset: %d, want 400", status)
	}
}

func fmtDoc(doc, mode string) string { return fmt.Sprintf(doc, mode) }
