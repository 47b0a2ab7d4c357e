package config

import (
	"encoding/json"
	"errors"
	"net/textproto"
	"strings"

	"gopkg.in/yaml.v3"
)

// sourceForms lists the accepted spellings, for error messages.
const sourceForms = "want header:NAME, query:NAME, path:NAME, cookie:NAME, host or ip"

// ParseSource parses a source written "header:X-Origin", "query:id",
// "path:orderId", "cookie:sid", "host" or "ip". Header names are canonicalised
// (x-origin becomes X-Origin). An empty string is an error.
func ParseSource(s string) (Source, error) {
	src, msg := parseSource(s)
	if msg != "" {
		return Source{}, errors.New("config: " + msg)
	}
	return src, nil
}

// parseSource returns the source, or a message without the package prefix so
// that it can be embedded in a file:line error.
func parseSource(s string) (Source, string) {
	s = strings.TrimSpace(s)
	kind, name, hasName := strings.Cut(s, ":")
	bad := func(why string) (Source, string) {
		return Source{}, "invalid source " + quote(s) + ": " + why + " (" + sourceForms + ")"
	}
	switch SourceKind(kind) {
	case SourceHost, SourceIP:
		if hasName {
			return bad(kind + " takes no name")
		}
		return Source{Kind: SourceKind(kind)}, ""
	case SourceHeader, SourceCookie:
		if name == "" {
			return bad("missing name after " + quote(kind+":"))
		}
		if !IsToken(name) {
			return bad(kind + " name " + quote(name) + " has characters not allowed in an HTTP token")
		}
		if kind == string(SourceHeader) {
			name = textproto.CanonicalMIMEHeaderKey(name)
			if name == "Host" {
				// net/http takes Host out of the header fields: such a
				// source would never have a value, and limit nothing.
				return bad(`the Host header is read by the "host" source, not "header:Host"`)
			}
		}
		return Source{Kind: SourceKind(kind), Name: name}, ""
	case SourceQuery:
		if name == "" {
			return bad("missing name after \"query:\"")
		}
		if strings.TrimSpace(name) != name || strings.ContainsAny(name, "\t\r\n\v\f=&#") {
			// "query: id" would read a parameter " id", which no ?id=
			// is: a rule that limits nothing. A space inside is a name a
			// request can send (?first+name=x is "first name").
			return bad("query name " + quote(name) + " must not start or end with a space, nor hold a tab, \"=\", \"&\" or \"#\" (query:id reads ?id=1)")
		}
		return Source{Kind: SourceQuery, Name: name}, ""
	case SourcePath:
		if name == "" {
			return bad("missing name after \"path:\"")
		}
		if strings.ContainsAny(name, "{}:/*") {
			return bad("path parameter name " + quote(name) + " must not contain { } : / or *")
		}
		return Source{Kind: SourcePath, Name: name}, ""
	case SourceNone:
		if s == "" {
			return bad("empty")
		}
	}
	return bad("unknown kind " + quote(kind))
}

// IsToken reports whether s is an RFC 9110 token: header and cookie names,
// and methods (proxy refuses a method that is not one).
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// String returns s in the form ParseSource reads; "" for the zero Source.
func (s Source) String() string {
	if s.Name == "" {
		return string(s.Kind)
	}
	return string(s.Kind) + ":" + s.Name
}

// IsZero reports whether s is unset (no source configured).
func (s Source) IsZero() bool { return s.Kind == SourceNone }

// MarshalYAML writes s as its string form.
func (s Source) MarshalYAML() (any, error) { return s.String(), nil }

// UnmarshalYAML reads a scalar with ParseSource; an empty or null value is the
// zero Source.
func (s *Source) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("config: expected a source string, got " + describe(n) + " (" + sourceForms + ")")
	}
	if n.Tag == "!!null" || strings.TrimSpace(n.Value) == "" {
		*s = Source{}
		return nil
	}
	v, err := ParseSource(n.Value)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalJSON writes s as a JSON string.
func (s Source) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a JSON string with ParseSource; "" or null is the zero Source.
func (s *Source) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = Source{}
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return errors.New("config: a source must be a JSON string")
	}
	if strings.TrimSpace(str) == "" {
		*s = Source{}
		return nil
	}
	v, err := ParseSource(str)
	if err != nil {
		return err
	}
	*s = v
	return nil
}
