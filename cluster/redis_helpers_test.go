package cluster_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"sluice/cluster"
	"sluice/config"
	"sluice/internal/redistest"
	"sluice/internal/skipped"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial through its process-wide logger; the
	// tests kill Redis on purpose, so keep that out of the output.
	redis.SetLogger(redistest.QuietLogger{})
	// The parallel tests are the synthetic-time properties, the failovers
	// and the memory flood: each waits on its round trips to Redis, on
	// Sentinels or on keys to expire more than it runs (the properties: 50 s
	// of CPU in 60 s on 2 cores, their own Redis servers included), so four
	// at a time finish sooner than go test's default of one per core.
	// -parallel, when given, wins.
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		flag.Set("test.parallel", "4")
	}
	goleak.VerifyTestMain(skipped.Main(m))
}

const sharedRedis = "redis://127.0.0.1:6379/0"

// redisURL returns the shared local Redis, checked with a PING.
func redisURL(t testing.TB) string {
	t.Helper()
	opt, _ := redis.ParseURL(sharedRedis)
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		redistest.Missing(t, "no redis at 127.0.0.1:6379: "+err.Error())
	}
	return sharedRedis
}

// namespace is unique per test run so tests never share windows.
func namespace(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "test-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + hex.EncodeToString(b[:])
}

// privateRedis is a redis-server of this test's own, on a free port, that a
// test may kill and restart.
type privateRedis struct {
	t    testing.TB
	port int
	cmd  *exec.Cmd
}

func startPrivateRedis(t testing.TB) *privateRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		redistest.Missing(t, "redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r := &privateRedis{t: t, port: port}
	r.start()
	t.Cleanup(r.kill)
	return r
}

func (r *privateRedis) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }
func (r *privateRedis) url() string  { return "redis://" + r.addr() + "/0" }

func (r *privateRedis) start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("starting redis-server: %v", err)
	}
	opt, _ := redis.ParseURL(r.url())
	c := redis.NewClient(opt)
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("private redis-server on port %d did not answer: %v", r.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill stops the server by its PID and reaps it.
func (r *privateRedis) kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// pause stops the server (SIGSTOP) keeping its data; resume lets it go on.
// What clients sent meanwhile waits in its sockets, and runs when it goes
// on: a round trip that timed out may still reach Redis (cutProxy: one
// that never does).
func (r *privateRedis) pause()  { _ = r.cmd.Process.Signal(syscall.SIGSTOP) }
func (r *privateRedis) resume() { _ = r.cmd.Process.Signal(syscall.SIGCONT) }

// cutProxy is a TCP proxy in front of a private Redis that can cut the way
// to it (cut): what clients send meanwhile is read and thrown away, as a
// link that loses it would, so a round trip fails without Redis ever
// seeing it. A connection that lost bytes loses all it sends after (Redis
// would read the rest of a command as a new one); its client drops it at
// its timeout. Answers always pass. It can also slow the way (slow): a
// Redis that answers, late.
type cutProxy struct {
	l       net.Listener
	to      string
	cutting atomic.Bool
	lag     atomic.Int64 // ns each read from a client waits before it goes on to Redis
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn // both ends of every connection, closed at the end
	done    bool
}

// startCutProxy proxies to r until the test ends.
func startCutProxy(t testing.TB, r *privateRedis) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, to: r.addr()}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) url() string { return "redis://" + p.l.Addr().String() + "/0" }

// cut cuts the way to Redis (true) or mends it (false) for what is sent
// from now on; a connection cut stays cut.
func (p *cutProxy) cut(on bool) { p.cutting.Store(on) }

// slow holds what clients send from now on for d before it goes on to
// Redis (0: at once), so that every round trip takes d longer.
func (p *cutProxy) slow(d time.Duration) { p.lag.Store(int64(d)) }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return // closed
		}
		u, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			c.Close()
			u.Close()
			return
		}
		p.conns = append(p.conns, c, u)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.up(c, u)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(c, u)
			c.Close()
			u.Close()
		}()
	}
}

// up passes what client c sends to Redis (u) until the way is cut.
func (p *cutProxy) up(c, u net.Conn) {
	defer p.wg.Done()
	defer u.Close()
	defer c.Close()
	cut := false
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		cut = cut || n > 0 && p.cutting.Load()
		if d := time.Duration(p.lag.Load()); n > 0 && !cut && d > 0 {
			time.Sleep(d)
		}
		if n > 0 && !cut {
			if _, err := u.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close stops accepting, closes every connection and waits for its
// goroutines.
func (p *cutProxy) close() {
	p.l.Close()
	p.mu.Lock()
	p.done = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// stateLog counts OnState calls.
type stateLog struct{ downs, ups atomic.Int32 }

func (s *stateLog) on(up bool) {
	if up {
		s.ups.Add(1)
	} else {
		s.downs.Add(1)
	}
}

// newService builds a Service for the test, running Run until the test ends.
func newService(t testing.TB, opts cluster.Options) *cluster.Service {
	t.Helper()
	opts.Log = zerolog.New(zerolog.NewTestWriter(t))
	s, err := cluster.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		s.Close()
	})
	return s
}

func qpsRule(count float64, tt config.ThresholdType) *config.FlowRule {
	return &config.FlowRule{
		Resource: "orders", LimitApp: config.LimitAppDefault, Grade: config.GradeQPS,
		Count: count, Strategy: config.StrategyDirect, ControlBehavior: config.BehaviorReject,
		StatIntervalMs: 1000, ClusterMode: true,
		ClusterConfig: config.ClusterConfig{ThresholdType: tt},
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}
