package rulesource_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"sluice/internal/redistest"
	"sluice/internal/skipped"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the tests kill Redis on purpose.
	redis.SetLogger(redistest.QuietLogger{})
	goleak.VerifyTestMain(skipped.Main(m))
}

const sharedRedis = "redis://127.0.0.1:6379/0"

// client returns a client of url, checked with a PING, closed at the end.
func client(t testing.TB, url string) *redis.Client {
	t.Helper()
	c := dial(t, url)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		redistest.Missing(t, "no redis at "+url+": "+err.Error())
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
