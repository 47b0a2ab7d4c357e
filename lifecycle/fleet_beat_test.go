package lifecycle

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"sluice/rulesource"
)

// A gateway whose heartbeat cannot be written (Redis down, or an ACL user
// without scripting rights) is missing from /api/fleet: it says so once, at
// warn, not only at debug level every second.
func TestFleetHeartbeatFailureIsWarnedOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialerRetries: 1, DialTimeout: 50 * time.Millisecond})
	defer rdb.Close()
	var logs bytes.Buffer
	f := &fleet{store: rulesource.New(rdb, "k"), log: zerolog.New(&logs).Level(zerolog.DebugLevel), id: "gw"}
	ctx, cancel := context.WithTimeout(context.Background(), rulesource.BeatEvery*5/2)
	defer cancel()
	f.beat(ctx, "127.0.0.1:8080", func() (float64, float64) { return 0, 0 })
	out := logs.String()
	if n := strings.Count(out, `"level":"warn"`); n != 1 || !strings.Contains(out, "missing from /api/fleet") {
		t.Fatalf("want one warning naming /api/fleet over three failed beats, got:\n%s", out)
	}
	if n := strings.Count(out, "heartbeat not written"); n != 3 {
		t.Errorf("want 3 failed beats logged (1 warn, 2 debug), got %d:\n%s", n, out)
	}
}
