// Package redistest starts real Redis deployments for tests, as Debian's
// redis-server package runs them: a lone server, a master with a replica
// watched by three Sentinels (redis-server --sentinel), or a Redis Cluster
// of N shards (cluster-enabled servers joined by redis-cli --cluster create).
// Every process listens on 127.0.0.1 on a free port, keeps its files in the
// test's temporary directory, and is killed by its PID when the test ends.
//
// Without redis-server (or redis-cli, for a Cluster) a test fails under
// CI=true and is skipped loudly elsewhere.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice/internal/skipped"
)

// Need returns the path of the program name (redis-server, redis-cli), or
// ends the test: failed under CI=true, skipped elsewhere.
func Need(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("REDIS NEEDED (CI=true): %s not installed (Debian: apt-get install redis-server)", name)
	}
	skipped.Skip(t, "Redis ("+name+" not installed)",
		fmt.Sprintf("SKIPPED, REDIS NEEDED: %s not installed (Debian: apt-get install redis-server); these tests fail instead under CI=true", name))
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Server is one redis-server process (a data node or a Sentinel). Its
// methods are safe for concurrent use.
type Server struct {
	Port     int
	Dir      string // its working directory: config, log, cluster state
	Password string // requirepass, if started with one; Do logs in with it
	t        testing.TB
	args     []string
	mu       sync.Mutex
	cmd      *exec.Cmd // nil while stopped
}

// Addr is "127.0.0.1:port".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is "redis://127.0.0.1:port/0".
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Start starts a redis-server with args after the common ones (port, bind
// 127.0.0.1, no persistence, files in its own directory); the first of args
// may be a config file. It waits until the server answers PING, and kills
// it when the test ends.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	return startAuth(t, "", args...)
}

// startAuth is Start for a server with requirepass password: it must be
// known before the first PING.
func startAuth(t testing.TB, password string, args ...string) *Server {
	t.Helper()
	Need(t, "redis-server")
	dir, err := os.MkdirTemp(t.TempDir(), "redis-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Port: FreePort(t), Dir: dir, Password: password, t: t, args: args}
	t.Cleanup(s.Kill)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Restart starts the server again on the same port and directory (after
// Kill), and waits until it answers. It may be called from any goroutine.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("redistest: %s is running", s.Addr())
	}
	var args []string
	rest := s.args
	if len(rest) > 0 && strings.HasSuffix(rest[0], ".conf") {
		args, rest = append(args, rest[0]), rest[1:] // a config file must come first
	}
	args = append(args, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.Dir, "--logfile", filepath.Join(s.Dir, "redis.log"), "--daemonize", "no",
		"--repl-diskless-sync-delay", "0") // a replica syncs at once, not after 5 s
	args = append(args, rest...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: starting redis-server: %w", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.Do("PING")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server on %s did not answer: %w (log: %s)", s.Addr(), err, s.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill ends the process with SIGKILL (no shutdown, no goodbye to replicas or
// Sentinels) by its PID and reaps it. Killing a stopped server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Running reports whether the process was started and not killed.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Do sends one command to the server (after AUTH, with a Password) and
// returns its reply.
func (s *Server) Do(args ...string) (Reply, error) { return DoAuth(s.Addr(), s.Password, args...) }

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// WaitFor polls cond every 50ms until it holds, failing the test after within.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Reply is a decoded RESP reply: a string (simple, bulk, or an integer's
// digits), nil, or a []Reply. An error reply is returned as an error.
type Reply any

// Do sends one command to addr on a fresh connection. It depends on nothing
// but the standard library, so the harness works whatever client the code
// under test uses.
func Do(addr string, args ...string) (Reply, error) { return DoAuth(addr, "", args...) }

// DoAuth is Do after AUTH password ("" : none).
func DoAuth(addr, password string, args ...string) (Reply, error) {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	cmds := [][]string{args}
	if password != "" {
		cmds = [][]string{{"AUTH", password}, args}
	}
	for _, cmd := range cmds {
		fmt.Fprintf(&b, "*%d\r\n", len(cmd))
		for _, a := range cmd {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	if password != "" {
		if _, err := readReply(r); err != nil {
			return nil, err
		}
	}
	return readReply(r)
}

func readReply(r *bufio.Reader) (Reply, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, fmt.Errorf("redistest: empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return nil, fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		out := make([]Reply, n)
		for i := range out {
			if out[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("redistest: unexpected reply %q", line)
}

// Info returns one field of INFO (e.g. "role", "master_link_status"), or
// "" if the server does not answer.
func (s *Server) Info(field string) string {
	r, err := s.Do("INFO")
	str, _ := r.(string)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(str, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), field+":"); ok {
			return v
		}
	}
	return ""
}

// Sentinels is a master, one replica and three Sentinels watching them.
type Sentinels struct {
	MasterName string
	Master     *Server // the master at start; after a failover, the replica is
	Replica    *Server
	Sentinels  []*Server
}

// Addrs are the Sentinels' addresses.
func (s *Sentinels) Addrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, x := range s.Sentinels {
		out[i] = x.Addr()
	}
	return out
}

// SentinelOptions shape StartSentinels' deployment.
type SentinelOptions struct {
	// DownAfter is how long the master may be silent before the Sentinels
	// fail over (down-after-milliseconds); 0: 1s.
	DownAfter time.Duration
	// Password, if set, is the master's and replica's requirepass (and the
	// replica's masterauth, and the Sentinels' auth-pass).
	Password string
}

// StartSentinels starts a master, a replica of it and three Sentinels
// (quorum 2) that fail over to the replica when the master is silent for
// o.DownAfter. It returns when every Sentinel knows the replica and the two
// other Sentinels, so that a failover can start at once.
func StartSentinels(t testing.TB, o SentinelOptions) *Sentinels {
	t.Helper()
	if o.DownAfter <= 0 {
		o.DownAfter = time.Second
	}
	var auth []string
	if o.Password != "" {
		auth = []string{"--requirepass", o.Password, "--masterauth", o.Password}
	}
	s := &Sentinels{MasterName: "sluice-test"}
	s.Master = startAuth(t, o.Password, auth...)
	// A failover that did not happen is told only by the Sentinels' own
	// logs (an election lost, TILT on a busy machine): show them. (Registered after
	// the first server's TempDir, so it runs before the files go.)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, x := range append([]*Server{s.Master, s.Replica}, s.Sentinels...) {
			if x != nil {
				t.Logf("redis %s (%s) log:\n%s", x.Addr(), x.Dir, x.logTail())
			}
		}
	})
	s.Replica = startAuth(t, o.Password, append(auth, "--replicaof", "127.0.0.1", strconv.Itoa(s.Master.Port))...)
	WaitFor(t, 10*time.Second, "the replica syncs with its master", func() bool {
		return s.Replica.Info("master_link_status") == "up"
	})
	for range 3 {
		dir := syncCheapDir(t)
		// Sentinel rewrites its config file, so each has its own.
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\n"+
			"sentinel down-after-milliseconds %[1]s %[3]d\n"+
			"sentinel failover-timeout %[1]s %[4]d\n"+
			"sentinel parallel-syncs %[1]s 1\n",
			s.MasterName, s.Master.Port, o.DownAfter.Milliseconds(), max(3*o.DownAfter.Milliseconds(), 3000))
		if o.Password != "" {
			body += fmt.Sprintf("sentinel auth-pass %s %s\n", s.MasterName, o.Password)
		}
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		x := Start(t, conf, "--sentinel")
		// A Sentinel whose event loop stalls 2 s (a busy machine) enters
		// TILT and does nothing for 30 s, so a failover the test waits for
		// never comes (a CI run waited 12 s for one): here a stall of up to
		// 30 s is no TILT, and a TILT lasts 1 s. Redis before 7.0 has no
		// SENTINEL DEBUG and keeps its defaults.
		if _, err := x.Do("SENTINEL", "DEBUG", "tilt-trigger", "30000", "tilt-period", "1000"); err != nil {
			t.Logf("redistest: %s keeps its TILT defaults: %v", x.Addr(), err)
		}
		s.Sentinels = append(s.Sentinels, x)
	}
	// Sentinels find each other and the replica through the master's hello
	// channel and INFO, every 2 and 10 s; a failover needs them to.
	WaitFor(t, 30*time.Second, "the Sentinels know each other and the replica", func() bool {
		for _, x := range s.Sentinels {
			peers, _ := x.Do("SENTINEL", "SENTINELS", s.MasterName)
			reps, _ := x.Do("SENTINEL", "REPLICAS", s.MasterName)
			if p, _ := peers.([]Reply); len(p) != 2 {
				return false
			}
			if r, _ := reps.([]Reply); len(r) != 1 {
				return false
			}
		}
		return true
	})
	return s
}

// syncCheapDir is a new directory for files a server fsyncs in its event
// loop (a Sentinel rewrites its config at each vote and epoch): on tmpfs
// where there is one, where a busy disk cannot stall it; else in the
// test's TempDir. It is removed when the test ends.
func syncCheapDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "sluice-redistest-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// CurrentMaster is the master's address as the first Sentinel that answers
// names it, or "".
func (s *Sentinels) CurrentMaster() string {
	for _, x := range s.Sentinels {
		if a := s.namedBy(x); a != "" {
			return a
		}
	}
	return ""
}

// namedBy is the master Sentinel x names ("" if it does not answer).
func (s *Sentinels) namedBy(x *Server) string {
	r, err := x.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterName)
	if a, _ := r.([]Reply); err == nil && len(a) == 2 {
		h, _ := a[0].(string)
		p, _ := a[1].(string)
		return net.JoinHostPort(h, p)
	}
	return ""
}

// AnyNames reports whether any Sentinel names addr as the master. The
// Sentinel that led a failover names the new master first; the others
// learn it from its hello messages, up to seconds later, so a client that
// asked the leader may already write there while CurrentMaster still
// gives the old address.
func (s *Sentinels) AnyNames(addr string) bool {
	for _, x := range s.Sentinels {
		if s.namedBy(x) == addr {
			return true
		}
	}
	return false
}

// Cluster is a Redis Cluster: Masters own the slots (in equal ranges), each
// with Replicas[i] replicas.
type Cluster struct {
	Nodes []*Server // masters first, then replicas, as redis-cli assigned them at creation
}

// Addrs are every node's address.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// StartCluster starts shards x (1+replicas) cluster-enabled servers, joins
// them with redis-cli --cluster create (shards must be at least 3: redis-cli
// refuses fewer; use StartSingleShardCluster for one), and returns when
// every node reports cluster_state:ok. nodeTimeout is cluster-node-timeout:
// how long a master may be silent before its replica takes over.
func StartCluster(t testing.TB, shards, replicas int, nodeTimeout time.Duration) *Cluster {
	t.Helper()
	cli := Need(t, "redis-cli")
	c := startNodes(t, shards*(1+replicas), nodeTimeout)
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitOK(t)
	return c
}

// StartSingleShardCluster is a Redis Cluster of one master holding every
// slot: the baseline that shows what adding shards adds.
func StartSingleShardCluster(t testing.TB, nodeTimeout time.Duration) *Cluster {
	if nodeTimeout <= 0 {
		nodeTimeout = time.Second
	}
	t.Helper()
	c := startNodes(t, 1, nodeTimeout)
	if _, err := c.Nodes[0].Do("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
		t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE: %v", err)
	}
	c.waitOK(t)
	return c
}

func startNodes(t testing.TB, n int, nodeTimeout time.Duration) *Cluster {
	t.Helper()
	c := &Cluster{}
	for range n {
		// The cluster bus port is given, not port+10000, which may be taken
		// or past 65535.
		c.Nodes = append(c.Nodes, Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
			"--cluster-port", strconv.Itoa(FreePort(t))))
	}
	return c
}

// waitOK waits until every node reports cluster_state:ok and every replica
// has synced with its master: a replica that never synced cannot take over.
func (c *Cluster) waitOK(t testing.TB) {
	t.Helper()
	WaitFor(t, 30*time.Second, "every node reports cluster_state:ok and every replica is in sync", func() bool {
		for _, n := range c.Nodes {
			r, err := n.Do("CLUSTER", "INFO")
			if s, _ := r.(string); err != nil || !strings.Contains(s, "cluster_state:ok") {
				return false
			}
			if n.Info("role") == "slave" && n.Info("master_link_status") != "up" {
				return false
			}
		}
		return true
	})
}

// MasterOf returns the master that owns key's slot, as the first running
// node's CLUSTER SLOTS says, or nil.
func (c *Cluster) MasterOf(t testing.TB, key string) *Server {
	t.Helper()
	slot := c.Slot(t, key)
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		r, err := n.Do("CLUSTER", "SLOTS")
		if err != nil {
			continue
		}
		ranges, _ := r.([]Reply)
		for _, rg := range ranges {
			f, _ := rg.([]Reply)
			if len(f) < 3 {
				continue
			}
			lo, _ := strconv.Atoi(str(f[0]))
			hi, _ := strconv.Atoi(str(f[1]))
			if slot < lo || slot > hi {
				continue
			}
			m, _ := f[2].([]Reply)
			if len(m) < 2 {
				continue
			}
			port, _ := strconv.Atoi(str(m[1]))
			for _, x := range c.Nodes {
				if x.Port == port {
					return x
				}
			}
		}
		return nil
	}
	return nil
}

// Slot is key's hash slot, as the cluster computes it.
func (c *Cluster) Slot(t testing.TB, key string) int {
	t.Helper()
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		r, err := n.Do("CLUSTER", "KEYSLOT", key)
		if err == nil {
			v, _ := strconv.Atoi(str(r))
			return v
		}
	}
	t.Fatal("redistest: no running node answers CLUSTER KEYSLOT")
	return -1
}

// Keys lists the keys matching pattern on one node (SCAN, so it does not
// block it).
func (s *Server) Keys(pattern string) ([]string, error) {
	var out []string
	cursor := "0"
	for {
		r, err := s.Do("SCAN", cursor, "MATCH", pattern, "COUNT", "1000")
		if err != nil {
			return nil, err
		}
		a, _ := r.([]Reply)
		if len(a) != 2 {
			return nil, fmt.Errorf("redistest: SCAN answered %v", r)
		}
		cursor = str(a[0])
		ks, _ := a[1].([]Reply)
		for _, k := range ks {
			out = append(out, str(k))
		}
		if cursor == "0" {
			slices.Sort(out)
			return out, nil
		}
	}
}

func str(r Reply) string { s, _ := r.(string); return s }

// Missing ends a test that needs Redis and cannot reach it: failed under
// CI=true, skipped loudly elsewhere.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("REDIS NEEDED (CI=true): %s", why)
	}
	skipped.Skip(t, "Redis", fmt.Sprintf("SKIPPED, REDIS NEEDED: %s (these tests fail instead under CI=true)", why))
}

// QuietLogger is a go-redis logger (redis.SetLogger) that drops every
// message: tests kill Redis on purpose, and go-redis logs each failed dial.
type QuietLogger struct{}

// Printf drops the message.
func (QuietLogger) Printf(context.Context, string, ...any) {}
