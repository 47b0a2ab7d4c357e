package config

import "testing"

// TestRegexWithSemicolonIsNoPathParameter: the route check for
// a ';' (refused unless server.pathParameters is keep, "the route would
// match no request") scanned the whole pattern, regexps included, so a
// route that keeps ';' out of its parameter ({name:[^;/]+}) was refused,
// though it matches requests. Only the literal text of a pattern is a
// path.
func TestRegexWithSemicolonIsNoPathParameter(t *testing.T) {
	_, err := Parse("r.yaml", []byte(`
upstreams:
  up: {targets: ["http://a.invalid"]}
routes:
  - path: /files/{name:[^;/]+}
    upstream: up
`))
	if err != nil {
		t.Fatalf("a regexp excluding ';' refused: %v", err)
	}
	_, err = Parse("r.yaml", []byte(`
upstreams:
  up: {targets: ["http://a.invalid"]}
routes:
  - path: /files;v=1/{name}
    upstream: up
`))
	if err == nil {
		t.Fatal("a literal ';' in a route accepted under pathParameters: refuse")
	}
}
