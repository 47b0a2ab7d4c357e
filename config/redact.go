package config

import (
	"encoding/json"
	"net/url"
)

// MarshalJSON hides the Redis password: the rules in force are served on the
// admin API, which anyone who can reach the admin listener may read.
func (c Cluster) MarshalJSON() ([]byte, error) {
	type plain Cluster
	p := plain(c)
	if u, err := url.Parse(p.Redis); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			p.Redis = u.String()
		}
	}
	return json.Marshal(p)
}
