package rulesource_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"sluice/config"
	"sluice/internal/redisconn"
	"sluice/internal/redistest"
	"sluice/rulesource"
)

// The document and the heartbeats work on the other two forms a rules
// source may name: a master under Sentinel (with a password) and a 3-shard
// Cluster, for keys in different slots, one with a hash tag of its own. A
// push is delivered by its publication alone (the poll is an hour).
func TestPushWatchAndBeatOnSentinelAndCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0, 2*time.Second)
	se := redistest.StartSentinels(t, redistest.SentinelOptions{Password: "pw"})
	for name, f := range map[string]struct {
		target config.RedisTarget
		nodes  []*redistest.Server // where a subscription may be
	}{
		"cluster":  {config.RedisTarget{ClusterAddrs: cl.Addrs()}, cl.Nodes},
		"sentinel": {config.RedisTarget{Sentinel: &config.Sentinel{MasterName: se.MasterName, Addrs: se.Addrs(), Password: "pw"}}, []*redistest.Server{se.Master}},
	} {
		tg := f.target
		// subscribed reports whether a client listens on channel, on any node.
		subscribed := func(channel string) bool {
			for _, n := range f.nodes {
				if r, err := n.Do("PUBSUB", "NUMSUB", channel); err == nil {
					if l, ok := r.([]redistest.Reply); ok && len(l) == 2 && l[1] != "0" {
						return true
					}
				}
			}
			return false
		}
		t.Run(name, func(t *testing.T) {
			c, err := redisconn.New(tg, redisconn.Options{Timeout: time.Second, DialTimeout: 500 * time.Millisecond, Retries: 1, PoolSize: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := ctxT(t)
			for _, key := range []string{"sluice:rules", "{a}b", "other:rules"} {
				s := rulesource.New(c, key)
				var mu sync.Mutex
				var got []int64
				wctx, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() {
					s.Watch(wctx, rulesource.WatchOptions{Poll: time.Hour, OnDoc: func(d rulesource.Doc, err error) {
						mu.Lock()
						got = append(got, d.Version)
						mu.Unlock()
					}})
					close(done)
				}()
				waitFor(t, 5*time.Second, key+" subscribed", func() bool { return subscribed(key + ":changed") })
				d, err := s.Push(ctx, []byte("a: 1\n"), 0)
				if err != nil {
					t.Fatalf("%s push: %v", key, err)
				}
				waitFor(t, 3*time.Second, key+" delivered by publication", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(got) > 0 && got[len(got)-1] == d.Version
				})
				if err := s.Beat(ctx, rulesource.Beat{ID: "g1", Listen: "x", Version: 1}); err != nil {
					t.Fatal(err)
				}
				f, err := s.Fleet(ctx)
				if err != nil || len(f) != 1 || f[0].ID != "g1" || f[0].Version != 1 {
					t.Fatalf("%s: Fleet = %+v, %v; want g1 at version 1", key, f, err)
				}
				if err := s.Leave(ctx, "g1"); err != nil {
					t.Fatalf("%s: Leave: %v", key, err)
				}
				if f, err := s.Fleet(ctx); err != nil || len(f) != 0 {
					t.Fatalf("%s: Fleet after Leave = %+v, %v; want none", key, f, err)
				}
				stop()
				<-done
			}
		})
	}
}
