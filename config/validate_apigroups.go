package config

import (
	"regexp"
	"strings"
)

// apiGroups checks the apiGroups section and adds each group to ix as a
// resource rules may name. A group is matched on the path alone, so it may
// serve any route: a chain rule on it may name the entrance of any route,
// and a param rule a path parameter of any route (a request whose route has
// no such parameter has no value for it, and that rule lets it pass).
//
// A group's name must not be a route's resource: the two would share one
// statistics node, so a request of that route that the group matches would
// be counted twice there, and every rule on the name would be taken twice.
func (c *checker) apiGroups(ix *routeIndex) {
	groups := c.cfg.APIGroups
	if len(groups) == 0 {
		return
	}
	ix.groups = map[string]int{}
	allEntrances, allParams := map[string]bool{}, map[string]bool{}
	for _, m := range ix.entrances {
		for e := range m {
			allEntrances[e] = true
		}
	}
	for _, m := range ix.params {
		for p := range m {
			allParams[p] = true
		}
	}
	for i, g := range groups {
		p := idx("apiGroups", i)
		switch first, dup := ix.groups[g.Name]; {
		case g.Name == "":
			c.add(p+".name", "is required (the resource name rules use for the group)")
		case dup:
			c.add(p+".name", "duplicate API group %s (also apiGroups[%d], line %d)", quote(g.Name), first, groups[first].Line)
		case ix.resources[g.Name]:
			c.add(p+".name", "%s is already a route's resource (%s): a group needs a name of its own", quote(g.Name), c.routeOf(g.Name))
		default:
			ix.groups[g.Name] = i
			ix.order = append(ix.order, g.Name)
			ix.resources[g.Name] = true
			ix.entrances[g.Name] = allEntrances
			ix.params[g.Name] = allParams
		}
		if len(g.Match) == 0 && !c.bad[p+".match"] {
			c.add(p+".match", "must list at least one of { exact: PATH }, { prefix: PATH }, { regex: RE2 }")
		}
		for j, m := range g.Match {
			c.apiMatch(idx(p+".match", j), m)
		}
	}
}

// apiMatch checks one predicate of a group: exactly one of exact, prefix
// and regex, a path for the first two, a valid RE2 expression for regex.
func (c *checker) apiMatch(p string, m APIMatch) {
	set := 0
	for _, k := range [...]string{"exact", "prefix", "regex"} {
		if c.has(p + "." + k) {
			set++
		}
	}
	if set != 1 {
		c.add(p, "must set exactly one of exact, prefix and regex")
		return
	}
	switch {
	case c.has(p + ".exact"):
		c.matchPath(p+".exact", m.Exact)
	case c.has(p + ".prefix"):
		c.matchPath(p+".prefix", m.Prefix)
	default:
		if m.Regex == "" {
			c.add(p+".regex", "must not be empty (it would match every path: use { prefix: / })")
		} else if _, err := regexp.Compile(m.Regex); err != nil {
			c.add(p+".regex", "invalid regexp: %s", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	}
}

// matchPath checks an exact or prefix path: a path as a route spells it.
func (c *checker) matchPath(p, v string) {
	switch {
	case v == "" || v[0] != '/':
		c.add(p, "must be a path starting with \"/\", got %s", quote(v))
	case strings.ContainsAny(v, "?#"):
		c.add(p, "must be a path without a query or fragment (groups match the path alone), got %s", quote(v))
	case strings.ContainsAny(v, "{}"):
		// A request's path has no raw brace (it is escaped, %7B), so a
		// route-style {param} would match no request: a dead group.
		c.add(p, "must be a literal path, not a route pattern: {param} matches no request (use a prefix up to the parameter, or a regex; a literal brace is %%7B), got %s", quote(v))
	}
}

// routeOf names the first route serving resource, for messages.
func (c *checker) routeOf(resource string) string {
	for i, r := range c.cfg.Routes {
		if r.Resource == resource {
			return idx("routes", i) + ", line " + itoa(r.Line)
		}
	}
	return "a route"
}
