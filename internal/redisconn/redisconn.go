// Package redisconn turns the Redis that a rules file names (a
// config.RedisTarget: one URL, a Sentinel-watched master, or a Redis Cluster)
// into a go-redis client, with the connection settings of its caller, and
// tells which master node the client talks to. It never logs or returns a
// password: String and the addresses it reports carry none.
//
// Layer 2 of docs/architecture.md: it imports config (for RedisTarget) and
// nothing above it.
package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"sluice/config"
)

// Options are the caller's connection settings, the same for every form.
// The zero value of each field but Timeout has a default.
type Options struct {
	// Timeout bounds each read and write and the wait for a pooled
	// connection (required).
	Timeout time.Duration
	// DialTimeout bounds one dial; 0: max(Timeout, 50ms).
	DialTimeout time.Duration
	// Retries is how often go-redis itself retries a command that failed on
	// the network; 0: never, for callers that retry (or fall back) themselves.
	// MOVED and ASK redirects of a Redis Cluster are followed either way.
	Retries int
	// PoolSize is the connections per node; 0: go-redis's default.
	PoolSize int
	// ClusterReload is how often a Redis Cluster's slot map is read again
	// although no command was redirected; 0: 5s.
	ClusterReload time.Duration
}

// Client is a go-redis client for one RedisTarget plus what it knows of the
// master nodes. It is safe for concurrent use; Close it when done.
type Client struct {
	redis.UniversalClient
	dial   time.Duration // Options.DialTimeout, as New set it
	form   string
	desc   string
	single string                 // the redis form's host:port
	master atomic.Pointer[string] // sentinel form: where the last connection went
}

// DialTimeout is how long one dial may take (Options.DialTimeout).
func (c *Client) DialTimeout() time.Duration { return c.dial }

// New builds a client; it does not connect (go-redis dials on first use),
// so a gateway starts while Redis is down. It fails only on a target that
// validation would refuse.
func New(t config.RedisTarget, o Options) (*Client, error) {
	if o.Timeout <= 0 {
		return nil, errors.New("redisconn: Options.Timeout must be > 0")
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = max(o.Timeout, 50*time.Millisecond)
	}
	retries := o.Retries
	if retries <= 0 {
		retries = -1 // go-redis: 0 means its default of 3
	}
	if o.ClusterReload <= 0 {
		o.ClusterReload = 5 * time.Second
	}
	c := &Client{form: t.Form(), desc: t.String(), dial: o.DialTimeout}
	switch c.form {
	case config.RedisFormSingle:
		ro, err := redis.ParseURL(t.Redis)
		if err != nil {
			return nil, errors.New("redisconn: " + c.desc + ": " + redactErr(err, t.Redis))
		}
		c.single = ro.Addr
		ro.MaxRetries = retries
		ro.DialerRetries = 1
		ro.DialTimeout = o.DialTimeout
		ro.ReadTimeout, ro.WriteTimeout, ro.PoolTimeout = o.Timeout, o.Timeout, o.Timeout
		ro.ContextTimeoutEnabled = true
		ro.DisableIdentity = true
		ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		ro.PoolSize = o.PoolSize
		c.UniversalClient = redis.NewClient(ro)
	case config.RedisFormSentinel:
		s := t.Sentinel
		fo := &redis.FailoverOptions{
			MasterName:       s.MasterName,
			SentinelAddrs:    slices.Clone(s.Addrs),
			SentinelUsername: s.SentinelUsername,
			SentinelPassword: s.SentinelPassword,
			Username:         s.Username,
			Password:         s.Password,
			DB:               s.DB,
			MaxRetries:       retries,
			DialerRetries:    1,
			DialTimeout:      o.DialTimeout,
			ReadTimeout:      o.Timeout, WriteTimeout: o.Timeout, PoolTimeout: o.Timeout,
			ContextTimeoutEnabled: true,
			DisableIdentity:       true,
			PoolSize:              o.PoolSize,
		}
		if s.TLS {
			fo.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12} // server name from each address
		}
		rdb := redis.NewFailoverClient(fo)
		// The failover client dials "the master" by asking a Sentinel; the
		// connection's peer is the master it found.
		rdb.AddHook(masterHook{&c.master})
		c.UniversalClient = rdb
	case config.RedisFormCluster:
		co, err := clusterOptions(t.ClusterAddrs)
		if err != nil {
			return nil, errors.New("redisconn: " + c.desc + ": " + err.Error())
		}
		co.MaxRetries = retries
		co.MinRetryBackoff, co.MaxRetryBackoff = -1, -1 // a redirect or retry goes at once; Timeout bounds the call
		co.DialerRetries = 1
		co.DialTimeout = o.DialTimeout
		co.ReadTimeout, co.WriteTimeout, co.PoolTimeout = o.Timeout, o.Timeout, o.Timeout
		co.ContextTimeoutEnabled = true
		co.DisableIdentity = true
		co.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		co.PoolSize = o.PoolSize
		co.ClusterStateReloadInterval = o.ClusterReload
		c.UniversalClient = redis.NewClusterClient(co)
	default:
		return nil, errors.New("redisconn: no Redis named (set redis, sentinel or clusterAddrs)")
	}
	return c, nil
}

// clusterOptions reads the seeds as go-redis reads a cluster URL: the
// first seed's scheme and login for all, every seed an address.
func clusterOptions(addrs []string) (*redis.ClusterOptions, error) {
	first := addrs[0]
	if !strings.Contains(first, "://") {
		first = "redis://" + first
	}
	co, err := redis.ParseClusterURL(first)
	if err != nil {
		return nil, errors.New(redactErr(err, first))
	}
	co.Addrs = co.Addrs[:0]
	for _, a := range addrs {
		if strings.Contains(a, "://") {
			u, err := url.Parse(a)
			if err != nil {
				return nil, errors.New(redactErr(err, a))
			}
			a = u.Host
		}
		co.Addrs = append(co.Addrs, a)
	}
	return co, nil
}

// redactErr is err's text without the password s may hold (url errors quote
// the URL).
func redactErr(err error, s string) string {
	msg := err.Error()
	if u, perr := url.Parse(s); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, config.Mask)
		}
	}
	return msg
}

// Form is the form in use: config.RedisFormSingle, RedisFormSentinel or
// RedisFormCluster.
func (c *Client) Form() string { return c.form }

// String describes the Redis without passwords (config.RedisTarget.String).
func (c *Client) String() string { return c.desc }

// Master is one master node as the client knows it.
type Master struct {
	Addr string // host:port; "" while a Sentinel has not yet named one
	Err  error  // from PingMasters: nil if it answered
}

// Masters lists the master nodes: the single form's address; the master
// that the Sentinel form's newest connection went to ("" before the
// first), both without a round trip; a Redis Cluster's masters, from its
// slot map read anew (one CLUSTER SLOTS; the map held is kept if no node
// answers). Sorted by address.
func (c *Client) Masters(ctx context.Context) []Master {
	switch c.form {
	case config.RedisFormSingle:
		return []Master{{Addr: c.single}}
	case config.RedisFormSentinel:
		addr := ""
		if p := c.master.Load(); p != nil {
			addr = *p
		}
		return []Master{{Addr: addr}}
	}
	out, _ := c.eachMaster(ctx, func(context.Context, *redis.Client) error { return nil })
	return out
}

// PingMasters pings every master (one, or each shard's of a Redis Cluster,
// concurrently, after reading the slot map anew) and reports each. err is
// set when no master could be found at all.
func (c *Client) PingMasters(ctx context.Context) ([]Master, error) {
	if c.form != config.RedisFormCluster {
		err := c.Ping(ctx).Err()
		m := c.Masters(ctx)
		m[0].Err = err
		return m, nil
	}
	return c.eachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() })
}

// ReloadTopology re-reads a Redis Cluster's slot map now (a failed-over
// shard has a new master); other forms find their master on each dial.
func (c *Client) ReloadTopology(ctx context.Context) {
	if cc, ok := c.UniversalClient.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
}

func (c *Client) eachMaster(ctx context.Context, fn func(context.Context, *redis.Client) error) ([]Master, error) {
	cc := c.UniversalClient.(*redis.ClusterClient)
	var mu sync.Mutex
	var out []Master
	err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		err := fn(ctx, n)
		mu.Lock()
		out = append(out, Master{Addr: n.Options().Addr, Err: err})
		mu.Unlock()
		return nil // every master is tried; each reports its own error
	})
	slices.SortFunc(out, func(a, b Master) int { return strings.Compare(a.Addr, b.Addr) })
	return out, err
}

// masterHook records the peer of each new connection of a failover client.
type masterHook struct{ addr *atomic.Pointer[string] }

func (h masterHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := next(ctx, network, addr)
		if err == nil {
			a := cn.RemoteAddr().String()
			h.addr.Store(&a)
		}
		return cn, err
	}
}

func (masterHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (masterHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
