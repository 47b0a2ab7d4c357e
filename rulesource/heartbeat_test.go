package rulesource_test

import (
	"testing"
	"time"

	"sluice/rulesource"
)

func TestFleetListsFreshHeartbeats(t *testing.T) {
	c := client(t, sharedRedis)
	key := testKey(t, c)
	s := rulesource.New(c, key)
	ctx := ctxT(t)
	seen, beats := "{"+key+"}:fleet:seen", "{"+key+"}:fleet:beats"
	t.Cleanup(func() { c.Del(ctx, seen, beats) })

	if got, err := s.Fleet(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Fleet of no gateways = %v, %v", got, err)
	}
	for _, b := range []rulesource.Beat{
		{ID: "gw-b", Listen: "127.0.0.1:8082", Version: 4, PassQps: 10, BlockQps: 2.5},
		{ID: "gw-a", Listen: "127.0.0.1:8081", Version: 3, PassQps: 7},
		{ID: "gw-a", Listen: "127.0.0.1:8081", Version: 4, PassQps: 8}, // a later beat replaces the first
	} {
		if err := s.Beat(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "gw-a" || got[0].Version != 4 || got[0].PassQps != 8 ||
		got[1].ID != "gw-b" || got[1].Listen != "127.0.0.1:8082" || got[1].BlockQps != 2.5 {
		t.Fatalf("Fleet = %+v", got)
	}
	for _, b := range got {
		if d := time.Since(b.LastSeen); d < -time.Second || d > 2*time.Second {
			t.Errorf("%s last seen %v ago, want about now", b.ID, d)
		}
	}

	// A gateway whose last beat is older than BeatTTL is not listed; one
	// silent for over a minute is forgotten by the next beat of anyone.
	now := time.Now().UnixMilli()
	c.ZAdd(ctx, seen, redisZ(now-rulesource.BeatTTL.Milliseconds()-500, "gw-b"))
	c.ZAdd(ctx, seen, redisZ(now-2*time.Minute.Milliseconds(), "gw-gone"))
	c.HSet(ctx, beats, "gw-gone", `{"id":"gw-gone"}`)
	if got, _ := s.Fleet(ctx); len(got) != 1 || got[0].ID != "gw-a" {
		t.Fatalf("Fleet with gw-b silent for %v = %+v, want gw-a only", rulesource.BeatTTL, got)
	}
	if err := s.Beat(ctx, rulesource.Beat{ID: "gw-a"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.HExists(ctx, beats, "gw-gone").Result(); n {
		t.Error("an entry silent for two minutes was kept")
	}
	if n, _ := c.HExists(ctx, beats, "gw-b").Result(); !n {
		t.Error("an entry silent for seconds was forgotten")
	}

	// Leave takes a gateway out at once.
	if err := s.Leave(ctx, "gw-a"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Fleet(ctx); len(got) != 0 {
		t.Fatalf("Fleet after gw-a left = %+v", got)
	}
}
