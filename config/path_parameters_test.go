package config_test

import (
	"strings"
	"testing"

	"sluice/config"
)

// TestPathParametersSetting: server.pathParameters is refuse (unset) or
// keep; under refuse a route whose path holds a ';' (raw or %3B) would
// match no request, and is refused with its line.
func TestPathParametersSetting(t *testing.T) {
	const up = "upstreams: {up: {targets: [\"http://127.0.0.1:9001\"]}}\n"
	tests := []struct{ doc, want string }{ // want "": loads
		{"routes: [{path: /a, upstream: up}]\n", ""},
		{"server: {pathParameters: keep}\nroutes: [{path: \"/a;v=1\", upstream: up}]\n", ""},
		{"server: {pathParameters: refuse}\nroutes: [{path: /a, upstream: up}]\n", ""},
		{"server: {pathParameters: strip}\nroutes: [{path: /a, upstream: up}]\n", `server.pathParameters: must be one of refuse, keep, got "strip"`},
		{"routes: [{path: \"/a;v=1\", upstream: up}]\n", `routes[0].path: holds a ';'`},
		{"routes: [{path: \"/a%3Bv\", upstream: up}]\n", `routes[0].path: holds a ';'`},
	}
	loadsOrSays(t, up, tests)
}

// loadsOrSays parses prefix+doc for each case: it must load when want is
// "", else fail with an error holding want.
func loadsOrSays(t *testing.T, prefix string, tests []struct{ doc, want string }) {
	t.Helper()
	for _, tt := range tests {
		_, err := config.Parse("p.yaml", []byte(prefix+tt.doc))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v, want it loaded", tt.doc, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: err %v, want %q", tt.doc, err, tt.want)
		}
	}
}
