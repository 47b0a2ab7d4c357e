package config

import (
	"encoding/json"
	"net/url"
	"strings"
)

// MarshalJSON hides the Redis passwords: the rules in force are served on the
// admin API, which anyone who can reach the admin listener may read.
func (c Cluster) MarshalJSON() ([]byte, error) {
	type plain Cluster
	p := plain(c)
	p.RedisTarget = c.RedisTarget.Redacted()
	return json.Marshal(p)
}

// RedisRedacted is Redis with its password, if any, masked: for logs,
// messages and the admin API.
func (c Cluster) RedisRedacted() string { return redactURL(c.Redis) }

// redactURL masks the password of a redis:// URL; anything else, a
// host:port included, is returned as it is.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), masked)
			return u.String()
		}
		return s
	}
	// Unparsable (a bad port, say): mask what may be a password, between
	// the first ":" after "//" and the last "@".
	start := strings.Index(s, "//") + 2
	at := strings.LastIndexByte(s, '@')
	if start < 2 || at < start {
		return s
	}
	if i := strings.IndexByte(s[start:at], ':'); i >= 0 {
		return s[:start+i+1] + masked + s[at:]
	}
	return s
}
