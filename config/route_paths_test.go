package config

import (
	"strings"
	"testing"
)

// A route whose path no request's normalized path can equal is an error
// at its line (SPEC §11 normalizes what routes see): it validated and
// started, and its limits never saw a call. Parameters' regexps are not
// read as path text.
func TestUnmatchableRoutePaths(t *testing.T) {
	for _, tc := range []struct {
		path, merge string
		want        string // "" loads
	}{
		{"/a?x=1", "", "holds a '?'"},
		{"/a#f", "", "holds a '#'"},
		{"/a/./b", "", "holds a dot segment (\".\")"},
		{"/a/..", "", "holds a dot segment (\"..\")"},
		{"/%2e%2E/x", "", "holds a dot segment (\"%2e%2E\")"},
		{"/a%2eb/x", "", ""},
		{"/a//b", "", ""},      // normalized as a request's path is
		{"/a//b", "false", ""}, // or kept, as a request's path is
		{"/%68ello", "", ""},   // /hello, as a request's /%68ello is
		{"/a%20b", "", ""},
		{"/a%2Fb", "", ""},
		{"/a/{id:[0-9]?}", "", ""},
		{"/a/{id}/{rest:.+}", "", ""},
		{"/a.b/..c/*", "", ""},
	} {
		server := ""
		if tc.merge != "" {
			server = "server: {mergeSlashes: " + tc.merge + "}\n"
		}
		doc := server + "upstreams: {app: {targets: [\"http://127.0.0.1:1\"]}}\nroutes: [{path: '" + tc.path + "', upstream: app}]\n"
		_, err := Parse("r.yaml", []byte(doc))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it to load", tc.path, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "routes[0].path: "+tc.want) || !strings.Contains(err.Error(), "the route would match no request")):
			t.Errorf("%s: %v, want routes[0].path: %s… the route would match no request", tc.path, err, tc.want)
		}
	}
}
