package config

import (
	"encoding/json"
	"errors"
	"strings"

	"gopkg.in/yaml.v3"

	"sluice/internal/match"
)

// MaxKeySources is the most sources one composite key may join.
const MaxKeySources = 4

// Key is a param rule's param: the source its values come from, or several
// joined by "+" (a composite key, "ip+header:X-Tenant"). A composite key's
// value is one value of each of its sources, in the key's order, joined
// by JoinValue; a request lacking any of them has no value for the rule.
// nil (or empty) is unset.
type Key []Source

// ParseKey parses a param written "header:X-User" or "ip+header:X-Tenant"
// (each part read by ParseSource). A source name cannot hold "+".
func ParseKey(s string) (Key, error) {
	k, msg := parseKey(s)
	if msg != "" {
		return nil, errors.New("config: " + msg)
	}
	return k, nil
}

func parseKey(s string) (Key, string) {
	parts := strings.Split(s, "+")
	if len(parts) > MaxKeySources {
		return nil, "a composite key joins at most " + itoa(MaxKeySources) + " sources, got " + itoa(len(parts)) + " in " + quote(s)
	}
	k := make(Key, 0, len(parts))
	for _, p := range parts {
		src, msg := parseSource(p)
		if msg != "" {
			if len(parts) > 1 && strings.TrimSpace(p) == "" {
				return nil, "composite key " + quote(s) + " has an empty part (write sources joined by \"+\", as in ip+header:X-Tenant)"
			}
			return nil, msg
		}
		for _, prev := range k {
			if prev == src {
				return nil, "composite key " + quote(s) + " names " + src.String() + " twice"
			}
		}
		k = append(k, src)
	}
	return k, ""
}

// String returns k in the form ParseKey reads; "" for an unset Key.
func (k Key) String() string {
	if len(k) == 1 {
		return k[0].String()
	}
	var b strings.Builder
	for i, s := range k {
		if i > 0 {
			b.WriteByte('+')
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// IsZero reports whether k is unset.
func (k Key) IsZero() bool { return len(k) == 0 }

// Composite reports whether k joins several sources.
func (k Key) Composite() bool { return len(k) > 1 }

// MarshalYAML writes k as its string form.
func (k Key) MarshalYAML() (any, error) { return k.String(), nil }

// UnmarshalYAML reads a scalar with ParseKey; an empty or null value is unset.
func (k *Key) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("config: expected a source string, got " + describe(n) + " (" + sourceForms + ", or several joined by \"+\")")
	}
	if n.Tag == "!!null" || strings.TrimSpace(n.Value) == "" {
		*k = nil
		return nil
	}
	v, err := ParseKey(n.Value)
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// MarshalJSON writes k as a JSON string.
func (k Key) MarshalJSON() ([]byte, error) { return json.Marshal(k.String()) }

// UnmarshalJSON reads a JSON string with ParseKey; "" or null is unset.
func (k *Key) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*k = nil
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return errors.New("config: a param must be a JSON string")
	}
	if strings.TrimSpace(str) == "" {
		*k = nil
		return nil
	}
	v, err := ParseKey(str)
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// AddressValued reports whether k's values may be addresses, so that a cidr
// match can apply: the ip source, or a header (which may hold one). A
// composite key's joined values never are.
func (k Key) AddressValued() bool {
	return len(k) == 1 && (k[0].Kind == SourceIP || k[0].Kind == SourceHeader)
}

// AppendJoined appends v, one part of a composite key's value, to dst:
// after a "+" unless it is the first part, with every "\" and "+" in v
// escaped by a "\". The joined value thus reads as the parts written with
// "+" between them ("10.0.0.1+acme"), and two different lists of parts
// never join to the same value, whatever bytes they hold.
func AppendJoined(dst []byte, v string, first bool) []byte {
	if !first {
		dst = append(dst, '+')
	}
	for {
		i := strings.IndexAny(v, `\+`)
		if i < 0 {
			return append(dst, v...)
		}
		dst = append(dst, v[:i]...)
		dst = append(dst, '\\', v[i])
		v = v[i+1:]
	}
}

// SplitJoined is AppendJoined's inverse: the parts of a composite key's
// joined value, unescaped. ok is false when a "\" is followed by anything
// but "+" or "\" (or ends the value): AppendJoined never writes that, so no
// request's value is ever so spelled; parts then reads such a "\" as
// itself, so that rejoining them gives the spelling that was meant.
func SplitJoined(v string) (parts []string, ok bool) {
	ok = true
	var part []byte
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && i+1 < len(v) && (v[i+1] == '+' || v[i+1] == '\\'):
			i++
			part = append(part, v[i])
		case c == '\\':
			ok = false
			part = append(part, c)
		case c == '+':
			parts = append(parts, string(part))
			part = part[:0]
		default:
			part = append(part, c)
		}
	}
	return append(parts, string(part)), ok
}

// Matcher compiles m; the zero ParamMatch gives the Matcher of every value.
// Validation has refused every match it cannot compile.
func (m ParamMatch) Matcher() (match.Matcher, error) {
	if m.IsZero() {
		return match.Matcher{}, nil
	}
	return match.New(string(m.Strategy), m.Pattern)
}

// Class reports whether the item matches a class of values (its Match is a
// strategy other than exact) rather than its Value alone.
func (it ParamItem) Class() bool { return it.Match != "" && it.Match != MatchExact }

// Matcher compiles the item's class (see Class). Validation has refused
// every item it cannot compile.
func (it ParamItem) Matcher() (match.Matcher, error) {
	s := it.Match
	if s == "" {
		s = MatchExact
	}
	return match.New(string(s), it.Value)
}
