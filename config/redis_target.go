package config

import "strings"

// RedisTarget names one Redis deployment, in exactly one of three forms:
// Redis (a single server, or a proxy in front of one), Sentinel (a master
// and its replicas watched by Sentinels, failover followed) or ClusterAddrs
// (a Redis Cluster, found from any of the seeds). A section that talks to
// Redis embeds it inline, so each form is written at the section's level
// ("cluster.sentinel", "rulesSource.redis"); the checker's redisTarget
// validates it wherever it sits. It holds settings only: connecting is
// internal/redisconn's job.
type RedisTarget struct {
	// Redis is redis://[user:password@]host:port[/db], rediss:// for TLS.
	Redis    string    `yaml:"redis" json:"redis"`
	Sentinel *Sentinel `yaml:"sentinel" json:"sentinel,omitempty"`
	// ClusterAddrs are seed nodes of a Redis Cluster: each host:port, or all
	// of them redis:// (or rediss://) URLs carrying the same user and password.
	ClusterAddrs []string `yaml:"clusterAddrs" json:"clusterAddrs,omitempty"`
}

// Sentinel names a master by the name its Sentinels know it under.
type Sentinel struct {
	MasterName string   `yaml:"masterName" json:"masterName"`
	Addrs      []string `yaml:"addrs" json:"addrs"` // the Sentinels, host:port
	// Username and Password log in to the master and replicas (ACL user or
	// requirepass), as a redis:// URL's user:password would.
	Username string `yaml:"username" json:"username,omitempty"`
	Password string `yaml:"password" json:"password,omitempty"`
	// SentinelUsername and SentinelPassword log in to the Sentinels
	// themselves, which have their own requirepass / ACL users (Redis 6.2+)
	// apart from the data nodes'.
	SentinelUsername string `yaml:"sentinelUsername" json:"sentinelUsername,omitempty"`
	SentinelPassword string `yaml:"sentinelPassword" json:"sentinelPassword,omitempty"`
	DB               int    `yaml:"db" json:"db"`
	// TLS speaks TLS to the Sentinels and to the data nodes.
	TLS bool `yaml:"tls" json:"tls"`
}

// Forms of a RedisTarget, as Form reports them (and metrics label them).
const (
	RedisFormNone     = ""
	RedisFormSingle   = "redis"
	RedisFormSentinel = "sentinel"
	RedisFormCluster  = "cluster"
)

// Form says which form names the Redis: RedisFormSingle, RedisFormSentinel,
// RedisFormCluster, or RedisFormNone when none does. On a target that sets
// several (which validation refuses) the first of that order wins.
func (t RedisTarget) Form() string {
	switch {
	case t.Redis != "":
		return RedisFormSingle
	case t.Sentinel != nil:
		return RedisFormSentinel
	case len(t.ClusterAddrs) > 0:
		return RedisFormCluster
	}
	return RedisFormNone
}

// String describes the Redis in one line, never with a password:
// "redis://127.0.0.1:6379/0", "sentinel mymaster at 10.0.0.1:26379,10.0.0.2:26379",
// "cluster at 10.0.0.1:7000,10.0.0.2:7000".
func (t RedisTarget) String() string {
	r := t.Redacted()
	switch t.Form() {
	case RedisFormSingle:
		return r.Redis
	case RedisFormSentinel:
		return "sentinel " + r.Sentinel.MasterName + " at " + strings.Join(r.Sentinel.Addrs, ",")
	case RedisFormCluster:
		return "cluster at " + strings.Join(r.ClusterAddrs, ",")
	}
	return "no redis"
}
