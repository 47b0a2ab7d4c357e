package config

import "encoding/json"

// MarshalJSON hides the Redis passwords: the rules in force are served on the
// admin API, which anyone who can reach the admin listener may read.
func (c Cluster) MarshalJSON() ([]byte, error) {
	type plain Cluster
	p := plain(c)
	p.RedisTarget = c.RedisTarget.Redacted()
	return json.Marshal(p)
}
