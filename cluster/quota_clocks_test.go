package cluster_test

// Calendar quotas on gateways whose clocks disagree with Redis's: the
// period is read from the gateway's clock, the count's expiry is kept on
// Redis's.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/cluster"
	"sluice/config"
)

// A gateway whose clock is behind Redis's still finds its count: a key
// made to expire ten minutes after its reset on the gateway's clock was
// already past on Redis's for a gateway more than ten minutes behind, so
// Redis deleted the count at every pass (a day behind: 20 of 20 passed a
// quota of 3). Whatever the lag, the quota holds and the count lives until
// ten minutes after the gateway's reset, read on Redis's clock.
func TestQuotaCountOutlivesAGatewayClockBehindRedis(t *testing.T) {
	url := redisURL(t)
	rdb := redis.NewClient(must(redis.ParseURL(url)))
	defer rdb.Close()
	for _, lag := range []time.Duration{-3 * time.Hour, 0, 11 * time.Minute, 2 * time.Hour, 25 * time.Hour, 40 * 24 * time.Hour} {
		t.Run(fmt.Sprint("behind ", lag), func(t *testing.T) {
			ns := namespace(t)
			s := newService(t, cluster.Options{URL: url, Namespace: ns, Timeout: 5 * time.Second, Heartbeat: time.Hour})
			s.SetWallClock(func() time.Time { return time.Now().Add(-lag) })
			for _, window := range []config.Window{config.WindowDay, config.WindowMonth} {
				r := quotaRule(window, "UTC")
				passed := 0
				var reset time.Duration
				for range 20 {
					got := acquireQuota(t, s, r, "key-"+string(window))
					if got.ok {
						passed++
					}
					reset = got.reset
				}
				if passed != 3 {
					t.Errorf("%s quota of 3, the gateway's clock %v behind Redis's: %d of 20 calls passed", window, lag, passed)
				}
				keys, err := rdb.Keys(context.Background(), "{"+ns+":q:*").Result()
				if err != nil {
					t.Fatal(err)
				}
				var ttl time.Duration
				for _, k := range keys {
					if d, err := rdb.PTTL(context.Background(), k).Result(); err == nil && d > ttl {
						ttl = d
					}
				}
				if want := reset + 10*time.Minute; ttl < want-3*time.Second || ttl > want+time.Second {
					t.Errorf("%s quota, the gateway's clock %v behind: its count expires in %v (keys %q), want %v (ten minutes after its reset)",
						window, lag, ttl, keys, want)
				}
				if len(keys) > 0 {
					if err := rdb.Del(context.Background(), keys...).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// Of two gateways counting one value's day whose clocks disagree, the one
// whose day ends last keeps the count: the other's pass must not bring
// the expiry forward, or the count would vanish while the late gateway
// still counts into that day, and it would pass the quota again.
func TestQuotaExpiryIsTheLatestAsked(t *testing.T) {
	// A zone whose local time is mid-day, so that a gateway two hours
	// behind is in the same day.
	zone := ""
	for off := -12; off <= 12; off++ {
		name := "Etc/GMT"
		if off > 0 {
			name += fmt.Sprintf("-%d", off)
		} else if off < 0 {
			name += fmt.Sprintf("+%d", -off)
		}
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		if h := time.Now().In(loc).Hour(); h >= 4 && h < 20 {
			zone = name
			break
		}
	}
	url := redisURL(t)
	rdb := redis.NewClient(must(redis.ParseURL(url)))
	defer rdb.Close()
	ns := namespace(t)
	opts := cluster.Options{URL: url, Namespace: ns, Timeout: 5 * time.Second, Heartbeat: time.Hour}
	late, right := newService(t, opts), newService(t, opts)
	late.SetWallClock(func() time.Time { return time.Now().Add(-2 * time.Hour) })
	r := quotaRule(config.WindowDay, zone)
	first := acquireQuota(t, late, r, "key-1")
	for i, got := range []quotaAnswer{acquireQuota(t, right, r, "key-1"), acquireQuota(t, right, r, "key-1")} {
		if !got.ok || got.left != int64(1-i) {
			t.Fatalf("pass %d on the gateway with the right clock: %+v, want passed with %d left", i+1, got, 1-i)
		}
	}
	keys, err := rdb.Keys(context.Background(), "{"+ns+":q:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %q (%v), want the one value's day", keys, err)
	}
	ttl, err := rdb.PTTL(context.Background(), keys[0]).Result()
	if want := first.reset + 10*time.Minute; err != nil || ttl < want-3*time.Second || ttl > want+time.Second {
		t.Errorf("the count expires in %v (%v), want %v: ten minutes after the reset of the gateway two hours behind", ttl, err, want)
	}
	if got := acquireQuota(t, late, r, "key-1"); got.ok {
		t.Errorf("the late gateway passed a fourth call of a quota of 3: %+v", got)
	}
}
