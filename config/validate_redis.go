package config

import (
	"net"
	"net/url"
	"strconv"
	"strings"
)

// redisForms are RedisTarget's keys, in the order messages name them.
var redisForms = [...]string{"redis", "sentinel", "clusterAddrs"}

// redisTarget checks the Redis that the section at path names (a section
// embedding RedisTarget) without connecting to it, and reports whether one
// form names it. A second form is an error at its own line. Whether naming
// none is an error is the caller's to say.
func (c *checker) redisTarget(path string, t RedisTarget) bool {
	var set []string
	for _, f := range redisForms {
		if c.has(path+"."+f) && (f != "redis" || t.Redis != "") {
			set = append(set, f)
		}
	}
	for _, f := range set[min(1, len(set)):] {
		first := path + "." + set[0]
		c.add(path+"."+f, "only one of redis, sentinel and clusterAddrs may name the Redis, but %s is set too (line %d)",
			first, c.lineOf(first))
	}
	if t.Redis != "" {
		if msg := checkRedisURL(t.Redis); msg != "" {
			c.add(path+".redis", "%s", msg)
		}
	}
	if t.Sentinel != nil {
		c.sentinel(path+".sentinel", t.Sentinel)
	}
	if c.has(path + ".clusterAddrs") {
		c.clusterAddrs(path+".clusterAddrs", t.ClusterAddrs)
	}
	return len(set) > 0
}

func (c *checker) sentinel(path string, s *Sentinel) {
	if s.MasterName == "" {
		c.add(path+".masterName", "is required (the name the Sentinels monitor the master under, as in \"sentinel monitor mymaster ...\")")
	}
	if len(s.Addrs) == 0 {
		c.add(path+".addrs", "must list at least one Sentinel (host:port, usually port 26379)")
	}
	seen := map[string]int{}
	for i, a := range s.Addrs {
		p := idx(path+".addrs", i)
		if msg := checkHostPort(a, "a Sentinel's host:port, usually port 26379 (no scheme: set tls for TLS)"); msg != "" {
			c.add(p, "%s", msg)
			continue
		}
		if j, dup := seen[a]; dup {
			c.add(p, "duplicate address %s (also addrs[%d])", quote(a), j)
			continue
		}
		seen[a] = i
	}
	if s.DB < 0 {
		c.add(path+".db", "must be >= 0, got %d", s.DB)
	}
}

// clusterAddrs: seeds are all host:port, or all URLs with one scheme and one
// login, since a Cluster has one set of ACL users and speaks TLS on every
// node or on none.
func (c *checker) clusterAddrs(path string, addrs []string) {
	if len(addrs) == 0 {
		c.add(path, "must list at least one node of the Redis Cluster (host:port)")
		return
	}
	seen := map[string]int{}
	kind := func(a string) string { // scheme and login, "" for host:port
		if u, err := url.Parse(a); err == nil && strings.Contains(a, "://") {
			return u.Scheme + "://" + u.User.String()
		}
		return ""
	}
	want := kind(addrs[0])
	for i, a := range addrs {
		p := idx(path, i)
		shown := quote(redactURL(a))
		host := a
		if strings.Contains(a, "://") {
			u, err := url.Parse(a)
			switch {
			case err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "":
				c.add(p, "must be host:port or a redis:// (rediss:// for TLS) URL, got %s", shown)
				continue
			case u.RawQuery != "" || u.Fragment != "":
				c.add(p, "must not have a query or fragment (sluice sets the connection options itself), got %s", shown)
				continue
			case strings.Trim(u.Path, "/") != "" && strings.Trim(u.Path, "/") != "0":
				c.add(p, "must not name a database: a Redis Cluster has only database 0, got %s", shown)
				continue
			}
			host = u.Host
		}
		if msg := checkHostPort(host, "host:port or a redis:// (rediss:// for TLS) URL"); msg != "" {
			c.add(p, "%s", msg)
			continue
		}
		if i > 0 && kind(a) != want {
			c.add(p, "must be written like clusterAddrs[0]: every node a host:port, or every one a URL with the same scheme, user and password, got %s", shown)
			continue
		}
		if j, dup := seen[host]; dup {
			c.add(p, "duplicate node %s (also clusterAddrs[%d])", quote(host), j)
			continue
		}
		seen[host] = i
	}
}

// checkHostPort returns "" for host:port with a host and a port in
// 1..65535, else what is wrong; form says what was expected.
func checkHostPort(a, form string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" || strings.ContainsAny(host, "/@") {
		return "must be " + form + ", got " + quote(redactURL(a))
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "the port must be a number in 1..65535, got " + quote(a)
	}
	return ""
}
