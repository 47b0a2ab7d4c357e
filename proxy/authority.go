package proxy

import (
	"fmt"
	"net/netip"

	"sluice/config"
	"sluice/internal/match"
	"sluice/limiter"
)

// authorityGuard is a resource's authority rules (Sentinel AuthorityRule,
// SPEC §3 Semantics: Authority), compiled once per snapshot: every rule
// must let the caller through. It is the first guard of a route, so a
// refused caller takes nothing from any other; it holds no state, and a
// check allocates nothing (BenchmarkAuthority).
type authorityGuard struct {
	rules []authorityRule
	// groups are the rules of the API groups that may match the route's
	// requests, each checked when the call's path matches its group.
	groups []groupAuthority
	// addr: some rule names client addresses, so the route reads the
	// client's address (sources.client) before the guards run.
	addr bool
}

// groupAuthority is an API group's authority rules as a route sees them:
// e decides whether the group matches a call's path.
type groupAuthority struct {
	e    *groupEntry
	auth *authorityGuard
}

// authorityRule is one rule: the callers it names, by origin or by
// address, and whether it lets only them through (white) or refuses them.
type authorityRule struct {
	white    bool
	origins  map[string]struct{}
	prefixes []netip.Prefix // canonical (match.ParsePrefix), as the client's address is
}

// compileAuthority compiles the authority rules by resource, as config
// gives them. An address that is none is an error (config's validation
// refuses it first): dropping it would widen a black list.
func compileAuthority(rules []config.AuthorityRule) (map[string]*authorityGuard, error) {
	out := map[string]*authorityGuard{}
	for i, r := range rules {
		// As config gives it: strategy defaulted and validated (white or black).
		ar := authorityRule{white: r.Strategy == config.AuthorityWhite, origins: map[string]struct{}{}}
		for _, app := range r.LimitApps() {
			ar.origins[app] = struct{}{}
		}
		for _, s := range r.IPs {
			p, ok := match.ParsePrefix(s)
			if !ok {
				return nil, fmt.Errorf("proxy: authorityRules[%d] (line %d): %q is not a CIDR or an IP address", i, r.Line, s)
			}
			ar.prefixes = append(ar.prefixes, p)
		}
		g := out[r.Resource]
		if g == nil {
			g = &authorityGuard{}
			out[r.Resource] = g
		}
		g.rules = append(g.rules, ar)
		g.addr = g.addr || len(ar.prefixes) > 0
	}
	return out, nil
}

// routeAuthority is the authority guard of a route of resource res: the
// resource's rules, then those of each API group of gg (the groups that
// may match the route) that has any. nil: no rule applies to the route.
func (s *Snapshot) routeAuthority(res string, gg *groupsGuard) *authorityGuard {
	own := s.authority[res]
	var groups []groupAuthority
	addr := own != nil && own.addr
	if gg != nil {
		for _, e := range gg.entries {
			if a := s.authority[e.g.name]; a != nil {
				groups = append(groups, groupAuthority{e: e, auth: a})
				addr = addr || a.addr
			}
		}
	}
	if groups == nil {
		return own
	}
	out := &authorityGuard{groups: groups, addr: addr}
	if own != nil {
		out.rules = own.rules
	}
	return out
}

// allows reports whether every rule of the guard's own lets a caller
// through (the groups' are checked by enter): origin is its
// origin ("" none), addr its address (the ip source's client; the zero
// Addr when it has none or no rule names addresses).
func (g *authorityGuard) allows(origin string, addr netip.Addr) bool {
	for i := range g.rules {
		if r := &g.rules[i]; r.names(origin, addr) != r.white {
			return false
		}
	}
	return true
}

// names reports whether the rule names the caller: its origin is in
// limitApp or its address in ips. A caller without an origin is named by
// its address only (unlike Sentinel, which lets a call without an origin
// pass every authority rule: a white list must not be passed by leaving
// the origin header out).
func (r *authorityRule) names(origin string, addr netip.Addr) bool {
	if origin != "" {
		if _, ok := r.origins[origin]; ok {
			return true
		}
	}
	if addr.IsValid() {
		for _, p := range r.prefixes {
			if p.Contains(addr) {
				return true
			}
		}
	}
	return false
}

var _ guard = (*authorityGuard)(nil)

var authorityRefused = limiter.Verdict{Blocked: true, Reason: limiter.ReasonAuthority}

func (g *authorityGuard) enter(_ int64, c *call) (token, limiter.Verdict) {
	if !g.allows(c.origin, c.addr) {
		return nil, authorityRefused
	}
	for i := range g.groups {
		if ga := &g.groups[i]; ga.e.matches(c.path) && !ga.auth.allows(c.origin, c.addr) {
			c.blockedBy = ga.e // the answer names the group
			return nil, authorityRefused
		}
	}
	return noToken{}, limiter.Verdict{}
}

func (*authorityGuard) refused(int64, *call) {}

// room: a caller an authority rule refuses is never let in; one it lets in
// stays let in.
func (*authorityGuard) room(_ int64, _ *call, retry int64) int64 { return retry }

// noToken is the token of a guard that holds nothing for a passed call; a
// zero-size value, so held in an interface it allocates nothing.
type noToken struct{}

func (noToken) exit(int64, outcome)          {}
func (noToken) cancel(int64, limiter.Reason) {}
