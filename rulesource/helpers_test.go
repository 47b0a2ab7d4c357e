package rulesource_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the tests kill Redis on purpose.
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

const sharedRedis = "redis://127.0.0.1:6379/0"

// needRedis fails under CI=true and skips elsewhere, loudly.
func needRedis(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("REDIS NEEDED (CI=true): %s", why)
	}
	t.Skipf("SKIPPED, REDIS NEEDED: %s (these tests fail instead under CI=true)", why)
}

// client returns a client of url, checked with a PING, closed at the end.
func client(t testing.TB, url string) *redis.Client {
	t.Helper()
	c := dial(t, url)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		needRedis(t, "no redis at "+url+": "+err.Error())
	}
	return c
}

// dial is a client with the timeouts a gateway gives its rules source: a
// dead Redis is noticed within a second.
func dial(t testing.TB, url string) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 500*time.Millisecond, time.Second, time.Second
	o.MaxRetries, o.PoolSize, o.ContextTimeoutEnabled, o.DisableIdentity = 1, 4, true, true
	return redis.NewClient(o)
}

// testKey is unique per test run, under this package's own prefix, and
// deleted at the end.
func testKey(t testing.TB, c *redis.Client) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	k := "sluice-test:rulesource:" + strings.ReplaceAll(t.Name(), "/", "-") + ":" + hex.EncodeToString(b[:])
	t.Cleanup(func() { c.Del(context.Background(), k) })
	return k
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// privateRedis is a redis-server of the test's own on a free port, which it
// may kill (by PID) and start again on the same port.
type privateRedis struct {
	t    testing.TB
	port int
	cmd  *exec.Cmd
}

func startPrivateRedis(t testing.TB) *privateRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		needRedis(t, "redis-server not installed")
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

func (r *privateRedis) url() string { return "redis://127.0.0.1:" + strconv.Itoa(r.port) + "/0" }

func (r *privateRedis) start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("starting redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(r.port)})
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

func (r *privateRedis) kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// waitFor polls cond until it holds or within passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func redisZ(score int64, member string) redis.Z {
	return redis.Z{Score: float64(score), Member: member}
}
