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

// WithoutCredentials is r with the values of its items masked (Mask) when
// its param reads a credential (a customer's API key given a count of its
// own); masked is false, and r returned as it is, when it names none.
func (r *ParamRule) WithoutCredentials() (out *ParamRule, masked bool) {
	if len(r.Items) == 0 || !r.Param.Credential() {
		return r, false
	}
	cp := *r
	cp.Items = append([]ParamItem(nil), r.Items...)
	for i := range cp.Items {
		cp.Items[i].Value = Mask
	}
	return &cp, true
}

// WithoutCredentials is c with the credentials its rules name as values
// masked (Mask): the values of the items of a param rule that reads a
// credential (a customer's API key given a count of its own) and, when
// origin.from reads one, the origins that flow and authority rules name in
// limitApp (default and other are no origins, and stay). The admin API
// shows it to a reader who could not write, as it shows the values the
// traffic brings. c is not changed; masked is false, and c returned as it
// is, when it names none.
func (c *Config) WithoutCredentials() (out *Config, masked bool) {
	origins := c.Origin.From.Credential()
	named := func(limitApp string) bool {
		return origins && limitApp != "" && limitApp != LimitAppDefault && limitApp != LimitAppOther
	}
	cp := *c
	for i := range c.ParamRules {
		pr, m := c.ParamRules[i].WithoutCredentials()
		if !m {
			continue
		}
		if !masked {
			cp.ParamRules, masked = append([]ParamRule(nil), c.ParamRules...), true
		}
		cp.ParamRules[i] = *pr
	}
	var m bool
	if cp.FlowRules, m = maskLimitApps(c.FlowRules, func(r *FlowRule) *string { return &r.LimitApp }, named); m {
		masked = true
	}
	if cp.AuthorityRules, m = maskLimitApps(c.AuthorityRules, func(r *AuthorityRule) *string { return &r.LimitApp }, named); m {
		masked = true
	}
	if !masked {
		return c, false
	}
	return &cp, true
}

// maskLimitApps is rules with Mask for every limitApp (at) that named
// accepts, in a copy made at the first; rules itself when none is.
func maskLimitApps[R any](rules []R, at func(*R) *string, named func(string) bool) ([]R, bool) {
	out := rules
	for i := range rules {
		if !named(*at(&rules[i])) {
			continue
		}
		if &out[0] == &rules[0] {
			out = append([]R(nil), rules...)
		}
		*at(&out[i]) = Mask
	}
	return out, len(out) > 0 && &out[0] != &rules[0]
}
