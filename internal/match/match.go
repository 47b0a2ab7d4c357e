// Package match tests strings against one pattern by a strategy: exact,
// prefix, contains, regex (Go RE2) or cidr (an address in a prefix). It is
// the one matcher of the rules file (a param rule's match, its items'
// classes), so that what validation accepts is what the check does.
//
// A Matcher is built once (a regex is compiled once, a prefix parsed once)
// and is immutable afterwards: Match is safe for concurrent use and
// allocates nothing.
package match

import (
	"errors"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// The strategies, as the rules file writes them.
const (
	Exact    = "exact"
	Prefix   = "prefix"
	Contains = "contains"
	Regex    = "regex"
	CIDR     = "cidr"
)

// Strategies lists the strategies in the order messages name them.
var Strategies = [...]string{Exact, Prefix, Contains, Regex, CIDR}

type kind uint8

const (
	kindAll kind = iota // the zero Matcher
	kindExact
	kindPrefix
	kindContains
	kindRegex
	kindCIDR
)

// Matcher is a compiled pattern. The zero Matcher matches every string.
type Matcher struct {
	kind    kind
	pattern string
	re      *regexp.Regexp
	prefix  netip.Prefix
}

// New compiles pattern for strategy (one of Strategies). An empty pattern is
// an error: it would match everything (prefix, contains, regex) or nothing
// (exact, cidr). The error's message has no package prefix, so that it can
// follow a file:line and a field.
func New(strategy, pattern string) (Matcher, error) {
	if pattern == "" {
		return Matcher{}, errors.New("must not be empty with strategy " + strategy)
	}
	m := Matcher{pattern: pattern}
	switch strategy {
	case Exact:
		m.kind = kindExact
	case Prefix:
		m.kind = kindPrefix
	case Contains:
		m.kind = kindContains
	case Regex:
		re, err := regexp.Compile(pattern)
		if err != nil {
			return Matcher{}, errors.New("invalid regexp: " + strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
		m.kind, m.re = kindRegex, re
	case CIDR:
		p, ok := ParsePrefix(pattern)
		if !ok {
			return Matcher{}, errors.New("must be a CIDR (10.0.0.0/8, 2001:db8::/32) or an IP address, got " + quote(pattern))
		}
		m.kind, m.prefix = kindCIDR, p
	default:
		return Matcher{}, errors.New("unknown strategy " + quote(strategy) + " (" + strings.Join(Strategies[:], ", ") + ")")
	}
	return m, nil
}

// Match reports whether v matches. A regex matches anywhere in v unless the
// pattern anchors it (^, $, \A, \z). A cidr matches an address written alone
// (no port, brackets or zone); an IPv4-mapped IPv6 address is its IPv4
// address, as the ip source gives it.
func (m *Matcher) Match(v string) bool {
	switch m.kind {
	case kindAll:
		return true
	case kindExact:
		return v == m.pattern
	case kindPrefix:
		return strings.HasPrefix(v, m.pattern)
	case kindContains:
		return strings.Contains(v, m.pattern)
	case kindRegex:
		return m.re.MatchString(v)
	case kindCIDR:
		a, err := netip.ParseAddr(v)
		return err == nil && a.Zone() == "" && m.prefix.Contains(a.Unmap())
	}
	return false
}

// All reports whether m is the zero Matcher, which matches every string.
func (m *Matcher) All() bool { return m.kind == kindAll }

// ParsePrefix parses a CIDR (10.0.0.0/8) or a single address (an address
// is the prefix of its full length), in the canonical form the gateway
// compares addresses in: masked, no zone, and an IPv4-mapped prefix
// (::ffff:10.0.0.0/104) as its IPv4 prefix (10.0.0.0/8).
func ParsePrefix(s string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return netip.Prefix{}, false
		}
		a = a.WithZone("")
		p = netip.PrefixFrom(a, a.BitLen())
	}
	p = p.Masked()
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, true
}

// quote is strconv.Quote, shortened for long input.
func quote(s string) string {
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return strconv.Quote(s)
}
