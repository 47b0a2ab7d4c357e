package proxy

import (
	"math/rand/v2"
	"testing"

	"sluice/config"
	"sluice/internal/match"
)

// TestGroupIndexMatchesEveryTest: the first-segment index of a
// route's groups marks exactly the entries whose own tests match a path,
// over random exact, prefix and regex entries and random paths.
func TestGroupIndexMatchesEveryTest(t *testing.T) {
	segs := []string{"", "/", "/a", "/a/", "/ab", "/a/b", "/b", "/b/a", "//", "/a//b", "/%41", "/a/b/"}
	res := []string{"^/a", "^/a/", "a", "^/a/b$", "^/(a|b)/", "^/ab?", "/$", "^/[ab]", "^/a(?i)B"}
	r := rand.New(rand.NewPCG(1, 2))
	pick := func() string {
		s := segs[r.IntN(len(segs))] + segs[r.IntN(len(segs))]
		if s == "" || s[0] != '/' {
			s = "/" + s
		}
		return s
	}
	for round := 0; round < 3000; round++ {
		var entries []*groupEntry
		for range 1 + r.IntN(6) {
			e := &groupEntry{g: &apiGroup{}}
			if r.IntN(5) > 0 {
				for range 1 + r.IntN(3) {
					var m config.APIMatch
					switch r.IntN(3) {
					case 0:
						m.Exact = pick()
					case 1:
						m.Prefix = pick()
					default:
						m.Regex = res[r.IntN(len(res))]
					}
					pt, err := compilePathTest(m, true)
					if err != nil {
						t.Fatal(err)
					}
					e.tests = append(e.tests, pt)
				}
			}
			entries = append(entries, e)
		}
		gg := newGroupsGuard(entries)
		for range 20 {
			p := pick()
			if n, ok := match.NormalizePath(p, true); ok {
				p = n
			}
			var m matchSet
			if !gg.match(p, &m) {
				t.Fatal("not indexed")
			}
			for i, e := range entries {
				if m.has(i) != e.matches(p) {
					t.Fatalf("round %d path %q entry %d (%+v): index %v, tests %v", round, p, i, e.tests, m.has(i), e.matches(p))
				}
			}
		}
	}
}

// TestGroupReach: what a route keeps of a group (none, some or all
// of its requests) agrees with the tests on the paths the route serves.
func TestGroupReach(t *testing.T) {
	pats := []string{"/a/{id}", "/{id}", "/a{id}", "/a/{id}/b", "/a/*", "/*", "/ab/{id}", "/a/b", "/a"}
	fills := []string{"x", "b", "a", "ab", "b/a", "a/b", ""}
	tests := []config.APIMatch{
		{Prefix: "/a"}, {Prefix: "/a/"}, {Prefix: "/a/b"}, {Prefix: "/ab"}, {Prefix: "/"}, {Prefix: "/b"},
		{Exact: "/a/b"}, {Exact: "/a"}, {Exact: "/ab"}, {Exact: "/a/x/b"},
		{Regex: "^/a/"}, {Regex: "^/a"}, {Regex: "b$"}, {Regex: "^/ab/x"}, {Regex: "^/b"}, {Regex: "^/a/b$"},
	}
	for _, pat := range pats {
		var paths []string
		for _, f := range fills {
			p := pat
			for _, ph := range []string{"{id}", "*"} {
				if i := indexOf(p, ph); i >= 0 {
					if ph == "{id}" && (f == "" || indexOf(f, "/") >= 0) {
						p = ""
						break
					}
					p = p[:i] + f + p[i+len(ph):]
				}
			}
			if p != "" {
				paths = append(paths, p)
			}
		}
		for _, m := range tests {
			pt, err := compilePathTest(m, true)
			if err != nil {
				t.Fatal(err)
			}
			rc := pt.reach(pat)
			for _, p := range paths {
				if got := pt.match(p); rc == reachNone && got || rc == reachAll && !got {
					t.Errorf("pattern %s, %+v: reach %d but path %s matches %v", pat, m, rc, p, got)
				}
			}
		}
	}
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
