package config

import "strings"

// credentialWords are the parts of a source's name that mark what it reads
// as a secret a caller presents (an API key, a session, a signature), as
// log scrubbers (Sentry's defaults, Rails' filter_parameters) recognise
// them: compared without case, "-" and "_", anywhere in the name.
var credentialWords = [...]string{"auth", "token", "key", "secret", "session", "pass", "pwd", "jwt", "credential", "signature"}

// Credential reports whether s reads what a caller presents to prove who
// it is: the Authorization, Proxy-Authorization and Cookie headers, any
// cookie, and a header, query or path parameter whose name holds one of
// credentialWords (X-Api-Key, access_token, sessionId). Such values are
// not shown to a reader of the admin API who could not also write
// (docs/admin.md#who-is-limited-now-apiparams). It errs on the side of
// secrecy: a name that merely looks like one (X-Keyboard) is one too.
func (s Source) Credential() bool {
	switch s.Kind {
	case SourceCookie:
		return true
	case SourceHeader, SourceQuery, SourcePath:
	default:
		return false
	}
	if s.Kind == SourceHeader && strings.EqualFold(s.Name, "Cookie") {
		return true
	}
	return credentialName(s.Name)
}

// credentialName reports whether a name (a header's, a query parameter's)
// holds one of credentialWords.
func credentialName(name string) bool {
	name = strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(name))
	for _, w := range credentialWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// Credential reports whether any source of k is a Credential: a composite
// key's value holds each of its parts.
func (k Key) Credential() bool {
	for _, s := range k {
		if s.Credential() {
			return true
		}
	}
	return false
}
