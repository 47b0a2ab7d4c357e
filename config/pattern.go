package config

import (
	"regexp"
	"slices"
	"strings"
)

// httpMethods are the methods a route may list (chi's), in the order a
// default route gets them.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE"}

// RouteMethods returns, in a fresh slice, the methods a route may list; a
// route that lists none is given all of them.
func RouteMethods() []string { return slices.Clone(httpMethods) }

// checkPattern checks a chi routing pattern the way chi would read it, so that
// building the router later cannot panic. It returns the URL parameter names,
// the pattern with parameter names erased (two patterns chi cannot tell apart
// have the same form), and a message when the pattern is invalid.
func checkPattern(p string) (params []string, norm string, msg string) {
	if p == "" {
		return nil, "", "must not be empty"
	}
	if p[0] != '/' {
		return nil, "", "must start with \"/\", got " + quote(p)
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '}':
			return nil, "", "unbalanced braces: \"}\" at offset " + itoa(i) + " has no \"{\""
		case '*':
			if i != len(p)-1 {
				return nil, "", "the wildcard \"*\" must be the last character (use a {param} in the middle)"
			}
			b.WriteByte(c)
		case '{':
			end, depth := -1, 0
			for j := i; j < len(p); j++ {
				if p[j] == '{' {
					depth++
				} else if p[j] == '}' {
					if depth--; depth == 0 {
						end = j
						break
					}
				}
			}
			if end < 0 {
				return nil, "", "unbalanced braces: \"{\" at offset " + itoa(i) + " is never closed"
			}
			if i > 0 && p[i-1] == '}' {
				return nil, "", "parameters must be separated by text, got \"}{\" at offset " + itoa(i-1)
			}
			seg := p[i : end+1]
			name, re, isRe := strings.Cut(p[i+1:end], ":")
			switch {
			case name == "":
				return nil, "", "parameter " + seg + " has no name"
			case strings.ContainsAny(name, "{}/*"):
				return nil, "", "parameter name " + quote(name) + " must not contain { } / or *"
			case isRe && re == "":
				return nil, "", "parameter " + seg + " has an empty regexp"
			}
			if isRe {
				// chi compiles the regexp anchored; the message shows it as written.
				_, err := regexp.Compile(re)
				if err == nil {
					_, err = regexp.Compile(anchored(re))
				}
				if err != nil {
					return nil, "", "parameter {" + name + "}: invalid regexp: " + strings.TrimPrefix(err.Error(), "error parsing regexp: ")
				}
			}
			for _, q := range params {
				if q == name {
					return nil, "", "duplicate parameter name " + quote(name)
				}
			}
			params = append(params, name)
			b.WriteString("{:" + re + "}")
			i = end
		default:
			b.WriteByte(c)
		}
	}
	return params, b.String(), ""
}

// anchored is a parameter's regexp as chi compiles it: anchored at both ends
// unless it already is.
func anchored(re string) string {
	if re[0] != '^' {
		re = "^" + re
	}
	if re[len(re)-1] != '$' {
		re += "$"
	}
	return re
}

// patternText is the literal text of a route pattern, its {param} and
// {param:regexp} parts each written '/' (so that no "%3B" forms across
// one): what a request's path must hold as written (a regexp such as
// [^;/]+ mentions a ';' it keeps out).
func patternText(p string) string { return literalText(p, '/') }

// literalText is p with each {param} and {param:regexp} part written sep.
func literalText(p string, sep byte) string {
	if strings.IndexByte(p, '{') < 0 {
		return p
	}
	var b strings.Builder
	depth := 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '{':
			if depth == 0 {
				b.WriteByte(sep)
			}
			depth++
		case c == '}' && depth > 0:
			depth--
		case depth == 0:
			b.WriteByte(c)
		}
	}
	return b.String()
}
