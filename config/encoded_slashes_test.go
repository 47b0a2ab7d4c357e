package config_test

import (
	"testing"

	"sluice/config"
)

// TestEncodedSlashesSetting: server.encodedSlashes is keep (unset, SPEC
// §11) or refuse; under refuse a route whose path holds %2F or %5C would
// match no request, and is refused with its line.
func TestEncodedSlashesSetting(t *testing.T) {
	const up = "upstreams: {up: {targets: [\"http://127.0.0.1:9001\"]}}\n"
	loadsOrSays(t, up, []struct{ doc, want string }{ // want "": loads
		{"routes: [{path: \"/a%2Fb\", upstream: up}]\n", ""},
		{"server: {encodedSlashes: keep}\nroutes: [{path: \"/a%2fb\", upstream: up}]\n", ""},
		{"server: {encodedSlashes: refuse}\nroutes: [{path: /a, upstream: up}]\n", ""},
		{"server: {encodedSlashes: decode}\nroutes: [{path: /a, upstream: up}]\n", `server.encodedSlashes: must be one of keep, refuse, got "decode"`},
		{"server: {encodedSlashes: refuse}\nroutes: [{path: \"/a%2Fb\", upstream: up}]\n", `p.yaml:3: routes[0].path: holds an escaped slash`},
		{"server: {encodedSlashes: refuse}\nroutes: [{path: \"/a%5cb\", upstream: up}]\n", `routes[0].path: holds an escaped slash`},
	})
	for p, want := range map[string]bool{
		"/a%2Fb": true, "/a%2fb": true, "/a%5Cb": true, "/a%5c": true, "%2F": true,
		"/a/b": false, "/a%20b": false, "/a%2": false, "/a%": false, "/a%25%2F": true, "/a%252F": false,
	} {
		if got := config.HasEncodedSlash(p); got != want {
			t.Errorf("HasEncodedSlash(%q) = %v, want %v", p, got, want)
		}
	}
}
