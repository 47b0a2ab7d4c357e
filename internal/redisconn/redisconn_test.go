package redisconn_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/config"
	"sluice/internal/redisconn"
	"sluice/internal/redistest"
)

func newClient(t *testing.T, target config.RedisTarget, timeout time.Duration) *redisconn.Client {
	t.Helper()
	c, err := redisconn.New(target, redisconn.Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestForms: each form gives the matching go-redis client and a description
// without its password; building connects to nothing.
func TestForms(t *testing.T) {
	tests := []struct {
		target config.RedisTarget
		form   string
		desc   string
		client any
	}{
		{config.RedisTarget{Redis: "redis://u:hunter2@127.0.0.1:1/3"}, config.RedisFormSingle,
			"redis://u:xxxxx@127.0.0.1:1/3", &redis.Client{}},
		{config.RedisTarget{Sentinel: &config.Sentinel{MasterName: "m", Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}, Password: "hunter2", SentinelPassword: "hunter2", TLS: true}},
			config.RedisFormSentinel, "sentinel m at 127.0.0.1:1,127.0.0.1:2", &redis.Client{}},
		{config.RedisTarget{ClusterAddrs: []string{"rediss://u:hunter2@127.0.0.1:1", "rediss://u:hunter2@127.0.0.1:2"}},
			config.RedisFormCluster, "cluster at rediss://u:xxxxx@127.0.0.1:1,rediss://u:xxxxx@127.0.0.1:2", &redis.ClusterClient{}},
		{config.RedisTarget{ClusterAddrs: []string{"127.0.0.1:1"}}, config.RedisFormCluster, "cluster at 127.0.0.1:1", &redis.ClusterClient{}},
	}
	for _, tt := range tests {
		c := newClient(t, tt.target, 20*time.Millisecond)
		if c.Form() != tt.form || c.String() != tt.desc {
			t.Errorf("Form() %q, String() %q; want %q, %q", c.Form(), c.String(), tt.form, tt.desc)
		}
		switch tt.client.(type) {
		case *redis.Client:
			if _, ok := c.UniversalClient.(*redis.Client); !ok {
				t.Errorf("%s: client is %T, want *redis.Client", tt.desc, c.UniversalClient)
			}
		case *redis.ClusterClient:
			if _, ok := c.UniversalClient.(*redis.ClusterClient); !ok {
				t.Errorf("%s: client is %T, want *redis.ClusterClient", tt.desc, c.UniversalClient)
			}
		}
	}
	cc := newClient(t, tests[2].target, 20*time.Millisecond).UniversalClient.(*redis.ClusterClient)
	if o := cc.Options(); o.Username != "u" || o.Password != "hunter2" || o.TLSConfig == nil ||
		strings.Join(o.Addrs, ",") != "127.0.0.1:1,127.0.0.1:2" || o.MaxRetries != -1 || o.ReadTimeout != 20*time.Millisecond {
		t.Errorf("cluster options: user %q, TLS %v, addrs %v, retries %d, read timeout %v", o.Username, o.TLSConfig != nil, o.Addrs, o.MaxRetries, o.ReadTimeout)
	}
}

func TestNewRefuses(t *testing.T) {
	if _, err := redisconn.New(config.RedisTarget{}, redisconn.Options{Timeout: time.Second}); err == nil {
		t.Error("New with no form: no error")
	}
	if _, err := redisconn.New(config.RedisTarget{Redis: "redis://127.0.0.1:1"}, redisconn.Options{}); err == nil {
		t.Error("New without a timeout: no error")
	}
	_, err := redisconn.New(config.RedisTarget{Redis: "redis://u:hunter2@127.0.0.1:1/x"}, redisconn.Options{Timeout: time.Second})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad database: err = %v, want an error without the password", err)
	}
}

// TestSingleMaster: the single form names its address, and a killed server
// fails the ping within the timeout rather than being retried.
func TestSingleMaster(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, config.RedisTarget{Redis: srv.URL()}, 200*time.Millisecond)
	ms, err := c.PingMasters(context.Background())
	if err != nil || len(ms) != 1 || ms[0].Addr != srv.Addr() || ms[0].Err != nil {
		t.Fatalf("PingMasters = %+v, %v; want %s answering", ms, err, srv.Addr())
	}
	srv.Kill()
	start := time.Now()
	ms, _ = c.PingMasters(context.Background())
	if ms[0].Err == nil || time.Since(start) > time.Second {
		t.Errorf("after kill: %+v in %v; want an error within the timeout", ms, time.Since(start))
	}
}

// TestSentinelFollowsFailover: the client writes to the master the
// Sentinels name; after SIGKILL of it, without any restart, it writes to
// the promoted replica, and Masters names that one.
func TestSentinelFollowsFailover(t *testing.T) {
	t.Parallel() // mostly waits (a failover, a browser): overlaps the other waiting tests
	s := redistest.StartSentinels(t, redistest.SentinelOptions{})
	c := newClient(t, config.RedisTarget{Sentinel: &config.Sentinel{MasterName: s.MasterName, Addrs: s.Addrs()}}, 200*time.Millisecond)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if m := c.Masters(ctx); m[0].Addr != s.Master.Addr() {
		t.Fatalf("Masters = %+v, want %s", m, s.Master.Addr())
	}
	s.Master.Kill()
	start := time.Now()
	redistest.WaitFor(t, 20*time.Second, "writes reach the new master", func() bool {
		return c.Set(ctx, "k", "after", 0).Err() == nil
	})
	t.Logf("writes resumed %v after the kill", time.Since(start).Round(10*time.Millisecond))
	if m := c.Masters(ctx); m[0].Addr != s.Replica.Addr() {
		t.Errorf("Masters after failover = %+v, want %s", m, s.Replica.Addr())
	}
	if v, _ := s.Replica.Do("GET", "k"); v != "after" {
		t.Errorf("GET k on the promoted replica = %v, want after", v)
	}
}

// TestClusterFollowsShardFailover: a three-shard cluster with a replica per
// shard; the master owning a key is killed; once its replica takes over
// (cluster-node-timeout), the client, told to reload the slot map, writes
// there, and PingMasters lists three answering masters, the new one among them.
func TestClusterFollowsShardFailover(t *testing.T) {
	t.Parallel() // mostly waits (a failover, a browser): overlaps the other waiting tests
	cl := redistest.StartCluster(t, 3, 1, time.Second)
	c := newClient(t, config.RedisTarget{ClusterAddrs: cl.Addrs()[:1]}, 200*time.Millisecond)
	ctx := context.Background()
	ms, err := c.PingMasters(ctx)
	if err != nil || len(ms) != 3 {
		t.Fatalf("PingMasters = %+v, %v; want 3 masters", ms, err)
	}
	for _, m := range ms {
		if m.Err != nil {
			t.Fatalf("master %s: %v", m.Addr, m.Err)
		}
	}
	const key = "{rule-1}:w"
	if err := c.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old := cl.MasterOf(t, key)
	old.Kill()
	start := time.Now()
	redistest.WaitFor(t, 20*time.Second, "writes to the key's slot resume", func() bool {
		if err := c.Set(ctx, key, "after", 0).Err(); err != nil {
			c.ReloadTopology(ctx)
			return false
		}
		return true
	})
	t.Logf("writes resumed %v after the kill", time.Since(start).Round(10*time.Millisecond))
	// The node MasterOf asks learns of the promotion by gossip, which may
	// come after the promoted replica took the write (a CI run found the
	// old master still listed there).
	var now *redistest.Server
	redistest.WaitFor(t, 10*time.Second, "the cluster lists the slot's new master", func() bool {
		now = cl.MasterOf(t, key)
		return now != nil && now != old
	})
	redistest.WaitFor(t, 10*time.Second, "PingMasters lists the new master, every master answering", func() bool {
		ms, err := c.PingMasters(ctx)
		found := false
		for _, m := range ms {
			if m.Err != nil {
				return false
			}
			found = found || m.Addr == now.Addr()
		}
		return err == nil && found && len(ms) == 3
	})
}
