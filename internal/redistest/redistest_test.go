package redistest_test

import (
	"strings"
	"testing"
	"time"

	"sluice/internal/redistest"
)

// TestSentinelsFailOver: the harness's deployment really fails over: after
// SIGKILL of the master, the Sentinels name the replica within seconds and
// it takes writes.
func TestSentinelsFailOver(t *testing.T) {
	t.Parallel() // mostly waits (a failover, a browser): overlaps the other waiting tests
	s := redistest.StartSentinels(t, redistest.SentinelOptions{})
	if got := s.CurrentMaster(); got != s.Master.Addr() {
		t.Fatalf("Sentinels name %q as master, want %s", got, s.Master.Addr())
	}
	start := time.Now()
	s.Master.Kill()
	redistest.WaitFor(t, 20*time.Second, "the Sentinels promote the replica", func() bool {
		return s.CurrentMaster() == s.Replica.Addr()
	})
	redistest.WaitFor(t, 10*time.Second, "the new master takes writes", func() bool {
		_, err := s.Replica.Do("SET", "k", "v")
		return err == nil
	})
	t.Logf("failover took %v", time.Since(start).Round(10*time.Millisecond))
}

// TestClusterShards: three shards own every slot between them, and a key's
// owner is found; a one-shard cluster owns them all alone.
func TestClusterShards(t *testing.T) {
	t.Parallel() // mostly waits (a failover, a browser): overlaps the other waiting tests
	c := redistest.StartCluster(t, 3, 0, time.Second)
	owners := map[int]bool{}
	for _, k := range []string{"{a}", "{b}", "{c}", "{d}", "{e}", "{f}"} {
		m := c.MasterOf(t, k)
		if m == nil {
			t.Fatalf("no master owns %s", k)
		}
		if _, err := m.Do("SET", k, "1"); err != nil {
			t.Fatalf("SET %s on its owner %s: %v", k, m.Addr(), err)
		}
		owners[m.Port] = true
	}
	if len(owners) < 2 {
		t.Errorf("six keys all on one shard of three")
	}
	one := redistest.StartSingleShardCluster(t, time.Second)
	if _, err := one.Nodes[0].Do("SET", "{x}", "1"); err != nil {
		t.Errorf("single shard: %v", err)
	}
	keys, err := one.Nodes[0].Keys("*")
	if err != nil || strings.Join(keys, ",") != "{x}" {
		t.Errorf("keys on the single shard: %v %v", keys, err)
	}
}
