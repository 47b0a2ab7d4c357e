package proxy

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"time"

	"sluice/config"
	"sluice/internal/match"
	"sluice/limiter"
)

// API groups (Sentinel's gateway API definitions, docs/rules.md#api-groups):
// a request is counted on its route's resource and on every group whose
// match its normalized path (view.path) satisfies, and the rules of each such
// group must pass too.
//
// What a group costs is decided per route when the snapshot is built: for a
// static route pattern the path is the pattern, so each group matches all of
// the route's requests or none; for a pattern with parameters the literal
// part before the first parameter decides every prefix predicate, and every
// exact or anchored regex one that cannot start that way. A route keeps only
// the groups that may match it, each with only the predicates still open, so
// a request that matches no group, on a route no group can reach, pays
// nothing: the route has no groups guard at all. The groups that may match
// a route are looked up in a groupIndex (apigroups_load_index.go), not
// scanned, so that loading stays linear in routes and groups.

// apiGroup is one group of a snapshot.
type apiGroup struct {
	name  string
	tests []pathTest // its match entries, compiled
	obs   Observer   // sluice_requests_total{resource=name} and the rest
}

// pathTest is one compiled match entry.
type pathTest struct {
	kind uint8 // testExact, testPrefix or testRegex
	s    string
	re   *regexp.Regexp
	lit  string // testRegex: the literal every match starts with at offset 0; "" if none is known
}

const (
	testExact = iota
	testPrefix
	testRegex
)

// reach is how many of a route's requests a test matches.
type reach uint8

const (
	reachNone reach = iota
	reachSome
	reachAll
)

// compilePathTest compiles one match entry; exact and prefix paths are
// normalized as route patterns are, so they are compared with view.path.
func compilePathTest(m config.APIMatch, mergeSlashes bool) (pathTest, error) {
	norm := func(p string) string {
		if n, ok := match.NormalizePath(p, mergeSlashes); ok {
			return n
		}
		return p
	}
	switch {
	case m.Exact != "":
		return pathTest{kind: testExact, s: norm(m.Exact)}, nil
	case m.Prefix != "":
		return pathTest{kind: testPrefix, s: norm(m.Prefix)}, nil
	}
	re, err := regexp.Compile(m.Regex)
	if err != nil {
		return pathTest{}, err
	}
	lit, whole := anchoredLiteral(m.Regex)
	if whole {
		// "^/v1/" is a prefix test: no regex run per request.
		return pathTest{kind: testPrefix, s: lit}, nil
	}
	return pathTest{kind: testRegex, re: re, lit: lit}, nil
}

// anchoredLiteral returns the literal that every match of expr starts with
// at the start of the path (expr begins with ^ or \A, then literal
// characters, case-sensitive), and whole when expr is nothing more.
func anchoredLiteral(expr string) (lit string, whole bool) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return "", false
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) == 0 || re.Sub[0].Op != syntax.OpBeginText {
		return "", false
	}
	var b strings.Builder
	i := 1
	for ; i < len(re.Sub); i++ {
		s := re.Sub[i]
		if s.Op != syntax.OpLiteral || s.Flags&syntax.FoldCase != 0 {
			break
		}
		b.WriteString(string(s.Rune))
	}
	return b.String(), i == len(re.Sub) && b.Len() > 0
}

func (t *pathTest) match(path string) bool {
	switch t.kind {
	case testExact:
		return path == t.s
	case testPrefix:
		return strings.HasPrefix(path, t.s)
	}
	if t.lit != "" && !strings.HasPrefix(path, t.lit) {
		return false // cannot match: no regex run
	}
	return t.re.MatchString(path)
}

// reach decides the test for the requests of a route whose pattern (as the
// router holds it, normalized) is pattern.
func (t *pathTest) reach(pattern string) reach {
	if isStatic(pattern) {
		if t.match(pattern) {
			return reachAll
		}
		return reachNone
	}
	// Every path the pattern matches starts with lit.
	lit := pattern[:strings.IndexAny(pattern, "{*")]
	switch t.kind {
	case testPrefix:
		if strings.HasPrefix(lit, t.s) {
			return reachAll
		}
		if strings.HasPrefix(t.s, lit) {
			return reachSome
		}
		return reachNone
	case testExact:
		if strings.HasPrefix(t.s, lit) {
			return reachSome
		}
		return reachNone
	}
	if t.lit != "" && !strings.HasPrefix(lit, t.lit) && !strings.HasPrefix(t.lit, lit) {
		return reachNone
	}
	return reachSome
}

// groupEntry is one group as one route (through one entrance) sees it: the
// tests still open for the route's paths (none: the group matches all of
// them) and the group's guards, their flow checker counting on the route's
// entrance.
type groupEntry struct {
	g       *apiGroup
	tests   []pathTest
	guards  guards
	blocked *groupBlock // the route's block body with the group's name
}

// groupBlock is a block body naming a group, rendered once per group and
// block body: a call a group blocks gets its route's answer (status,
// redirect, headers) with the group as {{.Resource}}.
type groupBlock struct {
	body        [numReasons][]byte
	grpcMessage *grpcMessages
}

func (e *groupEntry) matches(path string) bool {
	if e.tests == nil {
		return true
	}
	for i := range e.tests {
		if e.tests[i].match(path) {
			return true
		}
	}
	return false
}

// compileGroups compiles the snapshot's groups: their tests (each regex
// once) and observers.
func (s *Snapshot) compileGroups(g *Gateway) error {
	for i, ag := range s.Config.APIGroups {
		grp := &apiGroup{name: ag.Name, obs: g.deps.Observer(ag.Name)}
		for j, m := range ag.Match {
			t, err := compilePathTest(m, s.target.mergeSlashes)
			if err != nil {
				return fmt.Errorf("proxy: apiGroups[%d].match[%d]: %w", i, j, err)
			}
			grp.tests = append(grp.tests, t)
		}
		s.Flow.Track(ag.Name) // listed with the resources before its first request
		s.groups = append(s.groups, grp)
	}
	return nil
}

// groupCache shares what routes have in common while a snapshot is built:
// the index of the groups' tests, a group's guards by entrance, its block
// bodies by the route's body.
type groupCache struct {
	index   *groupIndex
	reached []groupReach // scratch: one route's
	guards  map[groupKey]guards
	blocks  map[blockKey]*groupBlock
}

func newGroupCache(groups []*apiGroup) *groupCache {
	return &groupCache{index: newGroupIndex(groups), guards: map[groupKey]guards{}, blocks: map[blockKey]*groupBlock{}}
}

type blockKey struct {
	g    *apiGroup
	body *config.BlockBody
}

// groupsFor builds the groups guard of a route with pattern (normalized),
// entrance and block answer br with body; nil when no group can match the
// route.
func (s *Snapshot) groupsFor(pattern, entrance string, br config.BlockResponse, body *config.BlockBody, cache *groupCache) (*groupsGuard, error) {
	cache.reached = cache.index.reaching(pattern, cache.reached[:0])
	var entries []*groupEntry
	for _, gr := range cache.reached {
		grp := gr.g
		k := groupKey{grp, entrance}
		gs, ok := cache.guards[k]
		if !ok {
			gs = s.groupGuards(grp.name, entrance)
			cache.guards[k] = gs
		}
		bk := blockKey{grp, body}
		gb := cache.blocks[bk]
		if gb == nil {
			r, err := renderBlock(br, body, grp.name)
			if err != nil {
				return nil, err
			}
			gb = &groupBlock{body: r.body, grpcMessage: r.grpcMessage}
			cache.blocks[bk] = gb
		}
		entries = append(entries, &groupEntry{g: grp, tests: gr.open, guards: gs, blocked: gb})
	}
	if entries == nil {
		return nil, nil
	}
	return newGroupsGuard(entries), nil
}

type groupKey struct {
	g        *apiGroup
	entrance string
}

// groupGuards are the guards of one group: its flow rules (on its own
// statistics node, and its (entrance, group) node), param rules and
// breakers, in the order of a route's own. The system guard is the route's.
func (s *Snapshot) groupGuards(name, entrance string) guards {
	var gs guards
	gs.add(flowGuard{s.Flow.Checker(name, entrance)})
	if p := s.Params.For(name); p != nil {
		gs.add(newParamGuard(p))
	}
	if b := s.Breakers.For(name); b != nil {
		gs.add(degradeGuard{b})
	}
	return gs
}

// groupsGuard checks a call against the groups its path matches, in file
// order, after the route's own guards. Each group is checked as a route's
// resource is (its guards in a loop, the first block decides); a block by
// one group gives back what the groups before it took, and counts the call
// as blocked on every group it matches.
type groupsGuard struct {
	entries []*groupEntry
	// The open tests indexed by the first path segment a matching path
	// must have ("/g5/" for prefix /g5/x, exact /g5/y or regex ^/g5/[0-9]),
	// so that a path is tested only against the tests of its own first
	// segment and those no segment decides (general): with many groups
	// on a catch-all route, a path none of them matches costs one lookup.
	// Used when entries fit in a matchSet; else each entry is tested.
	always  []int // entries with no open test
	bySeg   map[string][]testRef
	general []testRef
}

// testRef is one open test of entry e.
type testRef struct {
	e int
	t *pathTest
}

// matchSet marks the entries a path matches.
type matchSet [4]uint64

const maxIndexed = len(matchSet{}) * 64

func (m *matchSet) add(i int)      { m[i/64] |= 1 << (i % 64) }
func (m *matchSet) has(i int) bool { return m[i/64]&(1<<(i%64)) != 0 }

// firstSegment is the path up to and including its second '/', or all of it.
func firstSegment(p string) string {
	if len(p) > 1 {
		if i := strings.IndexByte(p[1:], '/'); i >= 0 {
			return p[:i+2]
		}
	}
	return p
}

// segmentOf is the first segment every path t matches has, or "" when t
// does not decide it.
func (t *pathTest) segmentOf() string {
	var lit string
	switch t.kind {
	case testExact:
		return firstSegment(t.s)
	case testPrefix:
		lit = t.s
	default:
		lit = t.lit
	}
	if seg := firstSegment(lit); len(seg) > 1 && seg[len(seg)-1] == '/' {
		return seg
	}
	return ""
}

func newGroupsGuard(entries []*groupEntry) *groupsGuard {
	gg := &groupsGuard{entries: entries}
	if len(entries) > maxIndexed {
		return gg
	}
	gg.bySeg = map[string][]testRef{}
	for i, e := range entries {
		if e.tests == nil {
			gg.always = append(gg.always, i)
		}
		for j := range e.tests {
			t := &e.tests[j]
			if seg := t.segmentOf(); seg != "" {
				gg.bySeg[seg] = append(gg.bySeg[seg], testRef{i, t})
			} else {
				gg.general = append(gg.general, testRef{i, t})
			}
		}
	}
	return gg
}

// match marks in m the entries path matches; false when entries are too
// many to index (then each entry is tested).
func (gg *groupsGuard) match(path string, m *matchSet) bool {
	if gg.bySeg == nil {
		return false
	}
	for _, i := range gg.always {
		m.add(i)
	}
	for _, r := range gg.general {
		if !m.has(r.e) && r.t.match(path) {
			m.add(r.e)
		}
	}
	for _, r := range gg.bySeg[firstSegment(path)] {
		if !m.has(r.e) && r.t.match(path) {
			m.add(r.e)
		}
	}
	return true
}

// IsGroup reports whether resource is an API group's: its statistics count
// requests already counted on their routes' resources (SPEC §3), so a sum
// of requests over resources leaves it out.
func (s *Snapshot) IsGroup(resource string) bool {
	for _, g := range s.groups {
		if g.name == resource {
			return true
		}
	}
	return false
}

var _ guard = (*groupsGuard)(nil)

// groupCall is what one matched group holds for a call.
type groupCall struct {
	e       *groupEntry
	c       call // the group's own tokens
	entered bool // c holds tokens (false: counted as a block only)
	dry     int  // the group's dryRun rules that would have blocked the call
}

// addGroup records that c matched e.
func (c *call) addGroup(e *groupEntry, parent *call) *groupCall {
	c.groups = append(c.groups, groupCall{e: e})
	gc := &c.groups[len(c.groups)-1]
	gc.c.origin, gc.c.n, gc.c.values = parent.origin, parent.n, parent.values
	gc.c.occupy, gc.c.parent = parent.occupy, parent
	return gc
}

// reserve makes room for n groups, so that addGroup never moves the
// groupCalls whose tokens point into them. It allocates once per pooled
// exchange and size.
func (c *call) reserve(n int) {
	if cap(c.groups) < n {
		c.groups = make([]groupCall, 0, n)
	}
}

func (gg *groupsGuard) enter(now int64, c *call) (token, limiter.Verdict) {
	c.reserve(len(gg.entries))
	var m matchSet
	indexed := gg.match(c.path, &m)
	var out limiter.Verdict
	for i, e := range gg.entries {
		if indexed && !m.has(i) || !indexed && !e.matches(c.path) {
			continue
		}
		gc := c.addGroup(e, c)
		if out.Blocked {
			gc.refused(now)
			continue
		}
		v := gc.enter(now)
		if !v.Blocked {
			out.Wait, out.DryRun = max(out.Wait, v.Wait), out.DryRun+v.DryRun
			if v.HasQuota && (!out.HasQuota || v.Quota.Remaining < out.Quota.Remaining) {
				out.Quota, out.HasQuota = v.Quota, true
			}
			continue
		}
		// This group blocks: the groups before it give back what they took.
		for i := len(c.groups) - 2; i >= 0; i-- {
			if p := &c.groups[i]; p.entered {
				p.c.cancel(now, v.Reason)
				p.entered = false
			}
		}
		if v.Reason == limiter.ReasonNone {
			return nil, v // a bad request (too many values): counted nowhere
		}
		out = v
		c.blockedBy = e
	}
	if out.Blocked {
		return nil, out
	}
	return (*groupsToken)(c), out
}

// refused counts a call an earlier guard blocked on every group it matches.
func (gg *groupsGuard) refused(now int64, c *call) {
	c.reserve(len(gg.entries))
	var m matchSet
	indexed := gg.match(c.path, &m)
	for i, e := range gg.entries {
		if indexed && m.has(i) || !indexed && e.matches(c.path) {
			c.addGroup(e, c).refused(now)
		}
	}
}

// enter runs the group's guards for its call.
func (gc *groupCall) enter(now int64) limiter.Verdict {
	sub := &gc.c
	var out limiter.Verdict
	gs := gc.e.guards.list[:gc.e.guards.n]
	for i, g := range gs {
		tok, v := g.enter(now, sub)
		if v.Blocked {
			sub.cancel(now, v.Reason)
			if v.Reason != limiter.ReasonNone {
				for _, later := range gs[i+1:] {
					later.refused(now, sub)
				}
			}
			return v
		}
		sub.hold(tok)
		out.Wait, gc.dry = max(out.Wait, v.Wait), gc.dry+v.DryRun
		if v.HasQuota && (!out.HasQuota || v.Quota.Remaining < out.Quota.Remaining) {
			out.Quota, out.HasQuota = v.Quota, true
		}
	}
	gc.entered = true
	return out
}

// room widens retry over the rules of every group the call matched (enter
// or refused listed them): the groups come last, so a route's refusal
// reads them here.
func (gg *groupsGuard) room(now int64, c *call, retry int64) int64 {
	for i := range c.groups {
		gc := &c.groups[i]
		for _, g := range gc.e.guards.list[:gc.e.guards.n] {
			retry = g.room(now, &gc.c, retry)
		}
	}
	return retry
}

func (gc *groupCall) refused(now int64) {
	gs := gc.e.guards.list[:gc.e.guards.n]
	for _, g := range gs {
		g.refused(now, &gc.c)
	}
}

// groupsToken is what the groups a call passed hold: the call itself,
// whose groups hold each group's tokens.
type groupsToken call

func (t *groupsToken) exit(now int64, o outcome) {
	c := (*call)(t)
	for i := len(c.groups) - 1; i >= 0; i-- {
		if gc := &c.groups[i]; gc.entered {
			gc.c.exit(now, o)
			gc.entered = false
		}
	}
}

func (t *groupsToken) cancel(now int64, reason limiter.Reason) {
	c := (*call)(t)
	for i := len(c.groups) - 1; i >= 0; i-- {
		if gc := &c.groups[i]; gc.entered {
			gc.c.cancel(now, reason)
			gc.entered = false
		}
	}
}

// observePass and observeBlock tell every group the call matched how it
// ended, as the route's own observer is told: passed (with the group's
// would-be dryRun blocks) or failed upstream, or blocked.
func (c *call) observePass(elapsed time.Duration, failed bool) {
	for i := range c.groups {
		gc := &c.groups[i]
		for ; gc.dry > 0; gc.dry-- {
			gc.e.g.obs.DryRun()
		}
		if failed {
			gc.e.g.obs.Error(elapsed)
		} else {
			gc.e.g.obs.Pass(elapsed)
		}
	}
}

func (c *call) observeBlock(reason string, elapsed time.Duration) {
	for i := range c.groups {
		c.groups[i].e.g.obs.Block(reason, elapsed)
	}
}
