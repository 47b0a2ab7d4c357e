package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"sluice/cluster"
	"sluice/config"
	"sluice/internal/redistest"
)

// statusLog keeps every Status that OnStatus reported.
type statusLog struct {
	mu  sync.Mutex
	all []cluster.Status
}

func (l *statusLog) on(st cluster.Status) {
	l.mu.Lock()
	l.all = append(l.all, st)
	l.mu.Unlock()
}

// saw reports whether some Status reported was up with exactly this master.
func (l *statusLog) saw(up bool, master string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, st := range l.all {
		if st.Up == up && len(st.Masters) == 1 && st.Masters[0].Addr == master && st.Masters[0].Up == up {
			return true
		}
	}
	return false
}

// decides reports whether the Service decides a call in Redis now.
func decides(s *cluster.Service, rule *config.FlowRule) bool {
	_, err := s.Acquire(rule, "", 1)
	return err == nil
}

// TestSentinelFailoverFollowed: a Service on a Sentinel-watched master
// decides in Redis; the master is killed (SIGKILL); meanwhile calls get no
// decision (the limiter falls back), and once the Sentinels have promoted
// the replica the Service decides in Redis again, without a restart, and
// reports the new master.
func TestSentinelFailoverFollowed(t *testing.T) {
	t.Parallel() // mostly waits (a failover, a browser): overlaps the other waiting tests
	sen := redistest.StartSentinels(t, redistest.SentinelOptions{})
	var log statusLog
	s := newService(t, cluster.Options{
		Redis:     config.RedisTarget{Sentinel: &config.Sentinel{MasterName: sen.MasterName, Addrs: sen.Addrs()}},
		Namespace: namespace(t), Timeout: 200 * time.Millisecond, Heartbeat: 100 * time.Millisecond, OnStatus: log.on,
	})
	rule := qpsRule(1e6, config.ThresholdGlobal)
	waitFor(t, 5*time.Second, "a decision in Redis", func() bool { return decides(s, rule) })
	waitFor(t, 5*time.Second, "Status names the master", func() bool { return log.saw(true, sen.Master.Addr()) })

	killed := time.Now()
	sen.Master.Kill()
	waitFor(t, 5*time.Second, "no decision while the master is gone", func() bool { return !decides(s, rule) })
	waitFor(t, 30*time.Second, "decisions in Redis again", func() bool { return decides(s, rule) && s.Up() })
	back := time.Since(killed)
	promoted := sen.CurrentMaster()
	t.Logf("decisions in Redis again %v after the kill; Sentinels name %s", back.Round(10*time.Millisecond), promoted)
	if promoted != sen.Replica.Addr() {
		t.Fatalf("Sentinels name %q, want the replica %s", promoted, sen.Replica.Addr())
	}
	waitFor(t, 5*time.Second, "Status names the promoted replica", func() bool {
		st := s.Status()
		return st.Up && st.Form == config.RedisFormSentinel && len(st.Masters) == 1 && st.Masters[0].Addr == sen.Replica.Addr()
	})
	if !log.saw(false, sen.Master.Addr()) {
		t.Errorf("OnStatus never reported the old master down: %+v", log.all)
	}
}

// TestClusterShardFailoverFollowed: a Service on a three-shard Redis Cluster
// with a replica per shard; the master holding the rule's window is killed;
// once its replica takes over, the Service decides in Redis again and
// reports three answering masters, the promoted one among them.
func TestClusterShardFailoverFollowed(t *testing.T) {
	t.Parallel() // mostly waits (a failover, a browser): overlaps the other waiting tests
	cl := redistest.StartCluster(t, 3, 1, time.Second)
	var log statusLog
	ns := namespace(t)
	s := newService(t, cluster.Options{
		Redis:     config.RedisTarget{ClusterAddrs: cl.Addrs()[:1]},
		Namespace: ns, Timeout: 200 * time.Millisecond, Heartbeat: 100 * time.Millisecond, OnStatus: log.on,
	})
	rule := qpsRule(1e6, config.ThresholdGlobal)
	waitFor(t, 5*time.Second, "a decision in Redis", func() bool { return decides(s, rule) })
	waitFor(t, 5*time.Second, "Status lists three answering masters", func() bool {
		st := s.Status()
		n := 0
		for _, m := range st.Masters {
			if m.Up {
				n++
			}
		}
		return st.Up && n == 3
	})
	keys := windowKeys(t, cl, ns)
	if len(keys) == 0 {
		t.Fatal("no window key found on any master")
	}
	old := cl.MasterOf(t, keys[0])
	killed := time.Now()
	old.Kill()
	waitFor(t, 5*time.Second, "no decision while the shard's master is gone", func() bool { return !decides(s, rule) })
	waitFor(t, 30*time.Second, "decisions in Redis again", func() bool { return decides(s, rule) && s.Up() })
	t.Logf("decisions in Redis again %v after the kill", time.Since(killed).Round(10*time.Millisecond))
	now := cl.MasterOf(t, keys[0])
	if now == nil || now == old {
		t.Fatalf("the window's slot is owned by %v after the failover", now)
	}
	st := s.Status()
	found := false
	for _, m := range st.Masters {
		found = found || (m.Addr == now.Addr() && m.Up)
		if m.Addr == old.Addr() {
			t.Errorf("Status still lists the killed master %s: %+v", old.Addr(), st)
		}
	}
	if !found || len(st.Masters) != 3 {
		t.Errorf("Status = %+v, want three masters with %s up", st, now.Addr())
	}
}

// windowKeys are the namespace's window keys, found on every running node.
func windowKeys(t *testing.T, cl *redistest.Cluster, ns string) []string {
	t.Helper()
	var out []string
	for _, n := range cl.Nodes {
		if !n.Running() {
			continue
		}
		ks, err := n.Keys("*" + ns + "*:w:*")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ks...)
	}
	return out
}

// TestGatewaysKeptThroughRecovery: after a failover the new master may
// lack the other gateways' heartbeats (a promoted replica's copy is
// seconds old, its entries expired), and the first gateway back read one
// live gateway and took the whole global count as its local share while
// the others still passed theirs: an e2e Sentinel failover passed 60 in
// one second against a count of 40. The count read while Redis is newly
// back cannot fall below the one before the failure until the others have
// had the time to announce themselves; a gateway that really left stops
// counting after that.
func TestGatewaysKeptThroughRecovery(t *testing.T) {
	srv := startPrivateRedis(t)
	const beat = 100 * time.Millisecond
	opts := cluster.Options{URL: srv.url(), Namespace: "recover", Timeout: 200 * time.Millisecond, Heartbeat: beat}
	a := newService(t, opts)
	b, err := cluster.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	waitFor(t, 5*time.Second, "both gateways to count two", func() bool { return a.Gateways() == 2 && b.Gateways() == 2 })
	// Redis fails; gateway b goes too (its entry cannot be removed); an
	// empty Redis comes back on the address, as a replica promoted without
	// fresh heartbeats.
	srv.kill()
	waitFor(t, 5*time.Second, "gateway a to see Redis fail", func() bool {
		_, _ = a.Acquire(qpsRule(100, config.ThresholdGlobal), "x", 1)
		return !a.Up()
	})
	cancel()
	<-done
	b.Close()
	srv.start()
	waitFor(t, 5*time.Second, "gateway a to find Redis again", func() bool {
		ok, err := a.Acquire(qpsRule(100, config.ThresholdGlobal), "x", 1)
		return ok && err == nil
	})
	back := time.Now()
	for time.Since(back) < 500*time.Millisecond {
		if n := a.Gateways(); n != 2 {
			t.Fatalf("%v after Redis came back: %d live gateways, want the 2 of before the failure", time.Since(back), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, 5*time.Second, "gateway a to stop counting the gateway that left", func() bool { return a.Gateways() == 1 })
}
