package proxy

import (
	"slices"
	"strings"
)

// groupIndex finds, while a snapshot is built, the match tests that may
// reach a route, so that each route decides only those: deciding every
// group's tests for every route made 10,000 routes and 10,000 groups
// load in 4 to 6 s, where SPEC §3 allows 2.
//
// A test is keyed by the literal every path it matches starts with: an
// exact test by its path, a prefix test by its prefix, a regex by its
// anchored literal start (pathTest.lit). Every path of a route starts
// with the route's head: its pattern when static, else the part before
// the first parameter. A test whose key is neither a prefix of the head
// nor starts with it matches none of the route's paths (reach says
// reachNone), and on a static route, whose one path is its head, neither
// does a key longer than the head. So a route looks up the prefixes of
// its head, one binary search per key length in use, and the range of
// keys that start with its head; only a regex with no literal start is
// decided for every route.
//
// A groupIndex is used by one build at a time: it keeps a scratch slice.
type groupIndex struct {
	tests   []groupTest // every test, in file order: group by group, then match by match
	keyed   []keyedTest // the tests with a key, by key
	lens    []int       // the distinct lengths of keys, ascending
	general []int       // the tests with no key, in file order
	ids     []int       // scratch: the candidates of one route
}

// groupTest is one match entry of group g.
type groupTest struct {
	g *apiGroup
	t *pathTest
}

// keyedTest is test id (an index in tests) and its key.
type keyedTest struct {
	key string
	id  int
}

// groupReach is a group that may match a route: open holds its tests
// still open for the route's paths, nil when it matches all of them.
type groupReach struct {
	g    *apiGroup
	open []pathTest
}

func newGroupIndex(groups []*apiGroup) *groupIndex {
	ix := &groupIndex{}
	for _, g := range groups {
		for i := range g.tests {
			t := &g.tests[i]
			id := len(ix.tests)
			ix.tests = append(ix.tests, groupTest{g, t})
			key, ok := t.key()
			if !ok {
				ix.general = append(ix.general, id)
				continue
			}
			ix.keyed = append(ix.keyed, keyedTest{key, id})
			ix.lens = append(ix.lens, len(key))
		}
	}
	slices.SortStableFunc(ix.keyed, func(a, b keyedTest) int { return strings.Compare(a.key, b.key) })
	slices.Sort(ix.lens)
	ix.lens = slices.Compact(ix.lens)
	return ix
}

// key is the literal every path t matches starts with; false when t has
// none and may match a path starting with anything.
func (t *pathTest) key() (string, bool) {
	if t.kind == testRegex {
		return t.lit, t.lit != ""
	}
	return t.s, true
}

// reaching appends to out, in file order, the groups that may match a
// route with pattern (normalized), each with its tests still open: the
// groups and tests an all-pairs scan of reach would keep, found by
// deciding only the tests the index cannot rule out.
func (ix *groupIndex) reaching(pattern string, out []groupReach) []groupReach {
	ids := ix.candidates(pattern, ix.ids[:0])
	slices.Sort(ids) // file order
	ix.ids = ids
	for k := 0; k < len(ids); {
		g := ix.tests[ids[k]].g
		var open []pathTest
		all := false
		for ; k < len(ids) && ix.tests[ids[k]].g == g; k++ {
			t := ix.tests[ids[k]].t
			switch t.reach(pattern) {
			case reachAll:
				all = true
			case reachSome:
				open = append(open, *t)
			}
		}
		if !all && open == nil {
			continue
		}
		if all {
			open = nil
		}
		out = append(out, groupReach{g, open})
	}
	return out
}

// candidates appends to ids the tests that may reach a route with
// pattern: every test that does is among them, each once.
func (ix *groupIndex) candidates(pattern string, ids []int) []int {
	head, static := pattern, isStatic(pattern)
	if !static {
		head = pattern[:strings.IndexAny(pattern, "{*")]
	}
	ids = append(ids, ix.general...)
	// Keys shorter than head: those that are a prefix of it.
	for _, n := range ix.lens {
		if n >= len(head) {
			break
		}
		for i := ix.first(head[:n]); i < len(ix.keyed) && ix.keyed[i].key == head[:n]; i++ {
			ids = append(ids, ix.keyed[i].id)
		}
	}
	// Keys that start with head: head itself first, then longer ones,
	// which a static route's one path cannot satisfy.
	for i := ix.first(head); i < len(ix.keyed) && strings.HasPrefix(ix.keyed[i].key, head); i++ {
		if static && len(ix.keyed[i].key) > len(head) {
			break
		}
		ids = append(ids, ix.keyed[i].id)
	}
	return ids
}

// first is the position of the first key not below s.
func (ix *groupIndex) first(s string) int {
	i, _ := slices.BinarySearchFunc(ix.keyed, s, func(k keyedTest, s string) int { return strings.Compare(k.key, s) })
	return i
}
