package proxy

import (
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestPatternTreesFindAsOneTree is differential: for random sets of
// patterns (spelled and parameter first segments, parameters inside a
// segment, regexps, catch-alls, two methods), finding a path in the tree
// of its first segment and then in the rest gives the pattern and path
// parameters that one chi tree of every pattern gives, for random paths
// and for edge paths a client may send (empty, no leading slash, empty
// segments, a trailing slash).
func TestPatternTreesFindAsOneTree(t *testing.T) {
	segs := []string{"a", "ab", "b", "{x}", "{y}", "a{x}", "{x}.json", "{n:[0-9]+}", "*"}
	values := []string{"a", "ab", "b", "7", "a7", "x.json", "abc", "", "7.json"}
	rnd := rand.New(rand.NewPCG(28, 5))
	found, paramFound := 0, 0
	for set := 0; set < 1000; set++ {
		one := chi.NewRouter()
		var trees patternTrees
		taken := map[string]bool{}
		for range 1 + rnd.IntN(12) {
			var b strings.Builder
			for i, n := 0, 1+rnd.IntN(3); i < n; i++ {
				s := segs[rnd.IntN(len(segs))]
				if i == 0 && rnd.IntN(3) > 0 {
					s = segs[rnd.IntN(3)] // spelled: a, ab or b
				}
				if s == "*" && i < n-1 {
					s = "b"
				}
				b.WriteString("/" + s)
			}
			pattern := b.String()
			if isStatic(pattern) {
				continue // the router keeps those in a map, not in chi
			}
			method := []string{http.MethodGet, http.MethodPost}[rnd.IntN(2)]
			if taken[method+pattern] {
				continue
			}
			if !registers(one, method, pattern) {
				continue // chi refuses the pattern beside the others: so would the snapshot
			}
			taken[method+pattern] = true
			trees.add(method, pattern)
		}
		paths := []string{"", "*", "/", "//", "a/b", "//a/7", "/a//7", "/a/7/"}
		for range 30 {
			var b strings.Builder
			for i, n := 0, 1+rnd.IntN(4); i < n; i++ {
				v := values[rnd.IntN(len(values))]
				if i == 0 && rnd.IntN(3) > 0 {
					v = values[rnd.IntN(3)] // a, ab or b
				}
				b.WriteString("/" + v)
			}
			paths = append(paths, b.String())
		}
		for _, path := range paths {
			method := []string{http.MethodGet, http.MethodPost}[rnd.IntN(2)]
			want, got := chi.NewRouteContext(), chi.NewRouteContext()
			wp := one.Find(want, method, path)
			gp := trees.find(got, method, path)
			if gp != wp || !slices.Equal(got.URLParams.Keys, want.URLParams.Keys) || !slices.Equal(got.URLParams.Values, want.URLParams.Values) {
				t.Fatalf("set %d, %s %s: found %q %v=%v, one tree finds %q %v=%v (patterns %v)",
					set, method, path, gp, got.URLParams.Keys, got.URLParams.Values, wp, want.URLParams.Keys, want.URLParams.Values, slices.Sorted(maps.Keys(taken)))
			}
			if wp != "" {
				found++
				if _, ok := spelledFirstSegment(wp); ok {
					paramFound++
				}
			}
		}
	}
	// The sweep must reach both trees, or it shows nothing.
	if found < 2000 || paramFound < 600 || found-paramFound < 1000 {
		t.Fatalf("only %d paths found a pattern, %d of them in a first segment's tree", found, paramFound)
	}
}

// registers adds pattern for method to mux, reporting false where chi
// refuses it (it panics).
func registers(mux *chi.Mux, method, pattern string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	mux.Method(method, pattern, http.HandlerFunc(findOnly))
	return true
}

// TestSpelledFirstSegment: which patterns go to a first segment's tree.
func TestSpelledFirstSegment(t *testing.T) {
	for _, c := range []struct {
		pattern, seg string
		ok           bool
	}{
		{"/svc/orders/{id}", "/svc/", true},
		{"/svc/{id}", "/svc/", true},
		{"/svc/*", "/svc/", true},
		{"/{tenant}/x", "", false},
		{"/v{n}/x", "", false},
		{"/svc*", "", false},
		{"/{id}", "", false},
		{"/{a:[a-z/]+}/x", "", false},
		{"//x/{id}", "//", true},
		{"/", "", false},
	} {
		seg, ok := spelledFirstSegment(c.pattern)
		if seg != c.seg || ok != c.ok {
			t.Errorf("%s: %q %v, want %q %v", c.pattern, seg, ok, c.seg, c.ok)
		}
	}
}
