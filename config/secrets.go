package config

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Mask stands for a secret wherever a setting is shown: logs, messages, the
// admin API (the rules as JSON and the rules file's raw text) and the
// settings a reload warns about.
const Mask = "xxxxx"

// A Secret is one place in the rules file that holds a secret, named by its
// YAML path: keys joined by ".", "[]" after a key for every element of its
// list ("cluster.clusterAddrs[]").
type Secret struct {
	Path string
	// URL: the value is a Redis URL, and only its password is secret.
	URL bool
}

// Secrets is every secret the rules file can hold. Every place that shows
// settings masks exactly these, with Mask (Config.Redacted, the sections'
// MarshalJSON, admin's raw rules file, the reload's warnings): a secret
// added here is masked everywhere, and TestSecretsMasked checks it.
func Secrets() []Secret {
	out := []Secret{{Path: "admin.token"}}
	for _, section := range []string{"cluster", "rulesSource"} {
		for _, s := range redisTargetSecrets() {
			out = append(out, Secret{Path: section + "." + s.Path, URL: s.URL})
		}
	}
	return out
}

// redisTargetSecrets are a RedisTarget's secrets, relative to the section
// that embeds it.
func redisTargetSecrets() []Secret {
	return []Secret{
		{Path: "redis", URL: true},
		{Path: "clusterAddrs[]", URL: true},
		{Path: "sentinel.password"},
		{Path: "sentinel.sentinelPassword"},
	}
}

// Masked is the value v of s as shown: Mask for a whole secret that is set,
// the URL with its password masked for a URL.
func (s Secret) Masked(v string) string {
	if s.URL {
		return redactURL(v)
	}
	if v == "" {
		return ""
	}
	return Mask
}

// Keys is the path's keys, "[]" standing for a list's elements.
func (s Secret) Keys() []string {
	var keys []string
	for _, k := range strings.Split(s.Path, ".") {
		if name, ok := strings.CutSuffix(k, "[]"); ok {
			keys = append(keys, name, "[]")
		} else {
			keys = append(keys, k)
		}
	}
	return keys
}

// Document is a rules-file fragment that sets s, and nothing else, to v: for
// the tests of every place that masks secrets.
func (s Secret) Document(v string) string {
	var b strings.Builder
	indent := ""
	keys := s.Keys()
	for i, k := range keys {
		last := i == len(keys)-1 || (i == len(keys)-2 && keys[i+1] == "[]")
		switch {
		case k == "[]":
			continue
		case last && i+1 < len(keys):
			fmt.Fprintf(&b, "%s%s:\n%s  - %q\n", indent, k, indent, v)
		case last:
			fmt.Fprintf(&b, "%s%s: %q\n", indent, k, v)
		default:
			fmt.Fprintf(&b, "%s%s:\n", indent, k)
		}
		indent += "  "
	}
	return b.String()
}

// Redacted is a copy of c with every secret (Secrets) masked, for logs and
// the admin API; c is unchanged.
func (c *Config) Redacted() *Config {
	out := *c
	redact(reflect.ValueOf(&out).Elem(), Secrets())
	return &out
}

// Redacted is t with every password masked, for logs and the admin API.
func (t RedisTarget) Redacted() RedisTarget {
	redact(reflect.ValueOf(&t).Elem(), redisTargetSecrets())
	return t
}

// redact masks secrets in v, an addressable struct, copying every pointer
// and slice on a secret's way so that the original is not changed.
func redact(v reflect.Value, secrets []Secret) {
	for _, s := range secrets {
		walkSecret(v, s.Keys(), s, true, func(str reflect.Value) { str.SetString(s.Masked(str.String())) })
	}
}

// walkSecret calls f with each string value at keys under v, the path of
// secret s. With cow, every pointer and slice on the way is copied first
// (so that f may set the value without changing the original). A path the
// schema does not have is a bug in Secrets, caught by TestSecretsMasked.
func walkSecret(v reflect.Value, keys []string, s Secret, cow bool, f func(reflect.Value)) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if cow {
			c := reflect.New(v.Type().Elem())
			c.Elem().Set(v.Elem())
			v.Set(c)
		}
		walkSecret(v.Elem(), keys, s, cow, f)
		return
	case reflect.Slice:
		if len(keys) == 0 || keys[0] != "[]" {
			panic("config: secret " + s.Path + " is a list: its path needs []")
		}
		if v.IsNil() {
			return
		}
		if cow {
			c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			reflect.Copy(c, v)
			v.Set(c)
		}
		for i := range v.Len() {
			walkSecret(v.Index(i), keys[1:], s, cow, f)
		}
		return
	case reflect.String:
		if len(keys) != 0 {
			panic("config: secret " + s.Path + " goes past a string")
		}
		f(v)
		return
	case reflect.Struct:
		if len(keys) == 0 {
			panic("config: secret " + s.Path + " names a section, not a value")
		}
		fv, ok := fieldByYAML(v, keys[0])
		if !ok {
			panic("config: secret " + s.Path + ": no field " + keys[0])
		}
		walkSecret(fv, keys[1:], s, cow, f)
		return
	}
	panic("config: secret " + s.Path + " is of kind " + v.Kind().String())
}

// fieldByYAML is the field of struct v that the YAML key name fills, looking
// into inline structs.
func fieldByYAML(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag == name {
			return v.Field(i), true
		}
		if strings.Contains(t.Field(i).Tag.Get("yaml"), ",inline") {
			if f, ok := fieldByYAML(v.Field(i), name); ok {
				return f, true
			}
		}
	}
	return reflect.Value{}, false
}

// redactURL masks the password of a redis:// URL, the value of a query
// parameter whose name may be a secret's, and the fragment (go-redis reads
// ?password=, and a user may put one there though config refuses a query);
// a host:port is returned as it is,
// but for what stands before an "@" in it (user:pw@host:port).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || !strings.Contains(s, "//") {
		// Unparsable (a bad port, say), or no URL ("user:pw@h:1" parses
		// as a scheme "user"): mask what may be a password, as written.
		return redactLoose(s)
	}
	changed := false
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), Mask)
		changed = true
	}
	if u.RawQuery != "" {
		u.RawQuery, changed = maskQuery(u.RawQuery), true
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment, changed = Mask, "", true
	}
	if !changed {
		return s
	}
	return u.String()
}

// redactLoose masks, in s as written, the password between the first ":"
// after any "//" and the last "@" (all of the userinfo when it has no ":"),
// and the query's secrets (maskQuery).
func redactLoose(s string) string {
	// The query begins at the first "?" after the userinfo: a password may
	// hold a "?" of its own ("user:pa?ss@host", which url.Parse refuses).
	q := ""
	if i := strings.IndexByte(s[strings.LastIndexByte(s, '@')+1:], '?'); i >= 0 {
		i += strings.LastIndexByte(s, '@') + 1
		s, q = s[:i], "?"+maskQuery(s[i+1:])
	}
	if from, to, ok := passwordSpan(s); ok {
		return s[:from] + Mask + s[to:] + q
	}
	if at := strings.LastIndexByte(s, '@'); at > 0 {
		start := strings.Index(s, "//") + 2
		if start < 2 {
			start = 0
		}
		if at > start {
			return s[:start] + Mask + s[at:] + q
		}
	}
	return s + q
}

// maskQuery writes Mask for the value of every name=value of a query
// whose name may hold a secret (password=, as go-redis reads it); the
// others (pool_size=9) say what a message is about.
func maskQuery(q string) string {
	parts := strings.Split(q, "&")
	for i, p := range parts {
		name, _, has := strings.Cut(p, "=")
		if unescaped, err := url.QueryUnescape(name); err == nil {
			name = unescaped
		}
		if has && credentialName(name) {
			parts[i] = p[:strings.IndexByte(p, '=')] + "=" + Mask
		}
	}
	return strings.Join(parts, "&")
}

// passwordSpan is where a URL's password may be, as written: between the
// first ":" after "//" (or the start, when there is none) and the last "@".
func passwordSpan(s string) (from, to int, ok bool) {
	start := strings.Index(s, "//") + 2
	if start < 2 {
		start = 0
	}
	at := strings.LastIndexByte(s, '@')
	if at < start {
		return 0, 0, false
	}
	i := strings.IndexByte(s[start:at], ':')
	if i < 0 {
		return 0, 0, false
	}
	return start + i + 1, at, true
}

// maskSecrets writes Mask over every secret of cfg that a message of errs
// quotes. An anchor lets a file put its admin.token in a field that
// refuses it (count: *token), and the message quoted the value ("expected a
// number, got ..."), which the open GET /api/rules and the log show. A
// secret of under four bytes is left: masking it would garble the words
// around it, and there is little to hide in it.
func maskSecrets(errs Errors, cfg *Config) {
	var forms []string
	for _, v := range secretValues(cfg) {
		if len(v) < 4 {
			continue
		}
		// As messages write it: quoted Go style (escaped), maybe cut at
		// 60 bytes (quote).
		forms = append(forms, v, strings.Trim(strconv.Quote(v), `"`))
		if len(v) > 60 {
			forms = append(forms, strings.Trim(strconv.Quote(v[:60]), `"`))
		}
	}
	if len(forms) == 0 {
		return
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) }) // the longest first
	for i := range errs {
		for _, f := range forms {
			errs[i].Msg = strings.ReplaceAll(errs[i].Msg, f, Mask)
		}
	}
}

// secretValues are the values of cfg's secrets as a message may quote
// them: whole secrets, and a URL's password as written and as url.Parse
// decodes it.
func secretValues(cfg *Config) []string {
	var out []string
	for _, s := range Secrets() {
		walkSecret(reflect.ValueOf(cfg).Elem(), s.Keys(), s, false, func(str reflect.Value) {
			v := str.String()
			if !s.URL {
				out = append(out, v)
				return
			}
			if from, to, ok := passwordSpan(v); ok {
				out = append(out, v[from:to])
			}
			if u, err := url.Parse(v); err == nil {
				if pw, ok := u.User.Password(); ok {
					out = append(out, pw)
				}
				for name, vs := range u.Query() {
					if credentialName(name) { // as maskQuery: pool_size=9 is no secret
						out = append(out, vs...)
					}
				}
				if u.Fragment != "" {
					out = append(out, u.Fragment)
				}
			}
		})
	}
	return out
}
