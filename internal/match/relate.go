package match

import "strings"

// Includes reports whether every string n matches, m matches too, where
// that can be told from the two patterns alone: a prefix or a contains
// pattern that a longer prefix or contains pattern holds, a cidr within a
// cidr, an exact string m matches. It is false where it cannot be told (a
// regex), so validation refuses only what never applies.
func (m *Matcher) Includes(n *Matcher) bool {
	switch {
	case m.kind == kindAll:
		return true
	case n.kind == kindExact:
		return m.Match(n.pattern)
	case m.kind == kindPrefix && n.kind == kindPrefix:
		return strings.HasPrefix(n.pattern, m.pattern)
	case m.kind == kindContains && (n.kind == kindPrefix || n.kind == kindContains):
		return strings.Contains(n.pattern, m.pattern)
	case m.kind == kindCIDR && n.kind == kindCIDR:
		return m.prefix.Bits() <= n.prefix.Bits() && m.prefix.Contains(n.prefix.Addr())
	}
	return false
}

// Disjoint reports whether no string matches both m and n, where that can
// be told from the two patterns alone: two prefixes neither of which
// starts the other, two cidrs that do not overlap, an exact string the
// other does not match. False where it cannot be told.
func (m *Matcher) Disjoint(n *Matcher) bool {
	switch {
	case m.kind == kindAll || n.kind == kindAll:
		return false
	case m.kind == kindExact:
		return !n.Match(m.pattern)
	case n.kind == kindExact:
		return !m.Match(n.pattern)
	case m.kind == kindPrefix && n.kind == kindPrefix:
		return !strings.HasPrefix(m.pattern, n.pattern) && !strings.HasPrefix(n.pattern, m.pattern)
	case m.kind == kindCIDR && n.kind == kindCIDR:
		return !m.prefix.Overlaps(n.prefix)
	}
	return false
}
