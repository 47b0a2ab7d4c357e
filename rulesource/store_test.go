package rulesource_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/config"
	"sluice/internal/redistest"
	"sluice/rulesource"
)

// Each write names the version it read; a write based on anything but the
// stored version is refused and stores nothing.
func TestPushIsCompareAndSet(t *testing.T) {
	c := client(t, sharedRedis)
	s := rulesource.New(c, testKey(t, c))
	ctx := ctxT(t)

	if d, err := s.Pull(ctx); err != nil || d.Version != 0 || d.Text != nil {
		t.Fatalf("Pull of an empty key = %+v, %v; want version 0, no text", d, err)
	}
	steps := []struct {
		text        string
		basedOn     int64
		wantVersion int64 // 0: a conflict
		wantStored  int64 // on a conflict, the version it names
	}{
		{"a: 1\n", 0, 1, 0},
		{"b: 2\n", 0, 0, 1}, // based on "nothing stored", but version 1 is
		{"c: 3\n", 1, 2, 0},
		{"d: 4\n", 1, 0, 2}, // a stale writer
		{"e: 5\n", 7, 0, 2}, // a version from the future
		{"f: 6\n", 2, 3, 0},
	}
	want := ""
	for i, st := range steps {
		before := time.Now().Add(-time.Second) // Redis's clock, give or take
		d, err := s.Push(ctx, []byte(st.text), st.basedOn)
		if st.wantVersion == 0 {
			var ce *rulesource.ConflictError
			if !errors.Is(err, rulesource.ErrConflict) || !errors.As(err, &ce) || ce.Stored != st.wantStored || ce.BasedOn != st.basedOn {
				t.Fatalf("step %d: Push based on %d = %+v, %v; want a conflict naming version %d", i, st.basedOn, d, err, st.wantStored)
			}
		} else {
			if err != nil || d.Version != st.wantVersion {
				t.Fatalf("step %d: Push based on %d = %+v, %v; want version %d", i, st.basedOn, d, err, st.wantVersion)
			}
			if d.PushedAt.Before(before) || d.PushedAt.After(time.Now().Add(time.Second)) {
				t.Errorf("step %d: pushedAt %v is not about now", i, d.PushedAt)
			}
			want = st.text
		}
		got, err := s.Pull(ctx)
		if err != nil || string(got.Text) != want {
			t.Fatalf("step %d: Pull = %q, %v; want %q (a refused write stores nothing)", i, got.Text, err, want)
		}
		if v, err := s.Version(ctx); err != nil || v != got.Version {
			t.Fatalf("step %d: Version = %d, %v; Pull says %d", i, v, err, got.Version)
		}
	}
}

// Writers racing on one version: exactly one wins each version, every
// loser is told, and the versions count the winning writes.
func TestConcurrentPushesLoseNothing(t *testing.T) {
	c := client(t, sharedRedis)
	s := rulesource.New(c, testKey(t, c))
	ctx := ctxT(t)
	const writers, rounds = 8, 10
	var mu sync.Mutex
	wins := map[int64]int{}
	conflicts := 0
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				cur, err := s.Pull(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				d, err := s.Push(ctx, []byte{byte('a' + w)}, cur.Version)
				mu.Lock()
				switch {
				case err == nil:
					wins[d.Version]++
				case errors.Is(err, rulesource.ErrConflict):
					conflicts++
				default:
					t.Error(err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	final, err := s.Pull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if int(final.Version) != len(wins) || len(wins)+conflicts != writers*rounds {
		t.Fatalf("final version %d, %d versions won, %d conflicts; want version = wins and wins+conflicts = %d", final.Version, len(wins), conflicts, writers*rounds)
	}
	for v, n := range wins {
		if n != 1 || v < 1 || v > final.Version {
			t.Errorf("version %d was won %d times", v, n)
		}
	}
	t.Logf("%d writers x %d rounds: %d versions stored, %d writes refused as stale", writers, rounds, len(wins), conflicts)
}

// A key that holds no document is reported as such, not as Redis being down.
func TestKeyThatIsNoDocument(t *testing.T) {
	c := client(t, sharedRedis)
	ctx := ctxT(t)
	cases := []struct {
		name  string
		setup func(key string) error
	}{
		{"a string", func(k string) error { return c.Set(ctx, k, "x", 0).Err() }},
		{"a version that is no number", func(k string) error { return c.HSet(ctx, k, "version", "two", "doc", "a: 1").Err() }},
		{"a negative version", func(k string) error { return c.HSet(ctx, k, "version", "-3", "doc", "a: 1").Err() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := testKey(t, c)
			if err := tc.setup(key); err != nil {
				t.Fatal(err)
			}
			s := rulesource.New(c, key)
			var de *rulesource.DataError
			if _, err := s.Pull(ctx); !errors.As(err, &de) {
				t.Errorf("Pull: %v, want a DataError", err)
			}
			if _, err := s.Push(ctx, []byte("a: 2\n"), 0); !errors.As(err, &de) {
				t.Errorf("Push: %v, want a DataError", err)
			}
			if s.LastSeen().IsZero() {
				t.Error("LastSeen is zero although Redis answered")
			}
		})
	}
}

func TestPushRefusesATooLargeDocument(t *testing.T) {
	c := client(t, sharedRedis)
	s := rulesource.New(c, testKey(t, c))
	_, err := s.Push(ctxT(t), make([]byte, config.MaxDocumentBytes+1), 0)
	if want := "rulesource: the document is 8388609 bytes, over the 8 MiB limit of a rules document"; err == nil || err.Error() != want {
		t.Fatalf("Push of 8 MiB + 1: %v, want %q", err, want)
	}
	if d, _ := s.Pull(ctxT(t)); d.Version != 0 {
		t.Fatalf("version %d stored", d.Version)
	}
}

// countingConn counts the bytes a client reads from Redis.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// A document over 8 MiB stored by another writer (redis-cli, an older
// sluice) is refused from its length: Pull reads a few bytes, not the 9
// MiB, and says which key and what limit. A document of exactly 8 MiB is
// pulled.
func TestPullRefusesATooLargeDocumentUnread(t *testing.T) {
	c := client(t, sharedRedis)
	key := testKey(t, c)
	var read atomic.Int64
	o, err := redis.ParseURL(sharedRedis)
	if err != nil {
		t.Fatal(err)
	}
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{conn, &read}, nil
	}
	counted := redis.NewClient(o)
	t.Cleanup(func() { counted.Close() })
	s := rulesource.New(counted, key)

	if err := c.HSet(ctxT(t), key, "version", 1, "doc", strings.Repeat("#", 9<<20)).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = s.Pull(ctxT(t))
	var de *rulesource.DataError
	want := "rulesource: the document at " + key + " is 9437184 bytes, over the 8 MiB limit of a rules document"
	if !errors.As(err, &de) || err.Error() != want {
		t.Errorf("Pull of 9 MiB: %v, want a DataError %q", err, want)
	}
	if n := read.Load(); n > 64<<10 {
		t.Errorf("Pull of a 9 MiB document read %d bytes from Redis, want it refused unread", n)
	}

	if err := c.HSet(ctxT(t), key, "version", 2, "doc", strings.Repeat("#", config.MaxDocumentBytes)).Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Pull(ctxT(t)); err != nil || d.Version != 2 || len(d.Text) != config.MaxDocumentBytes {
		t.Errorf("Pull of exactly 8 MiB: version %d, %d bytes, %v; want version 2 whole", d.Version, len(d.Text), err)
	}
}

// busyScript keeps Redis busy for ARGV[1] ms, as a slow command of another
// client would.
const busyScript = `local t0 = redis.call('TIME')
local s0 = t0[1] * 1000000 + t0[2]
while true do
  local t = redis.call('TIME')
  if t[1] * 1000000 + t[2] - s0 > tonumber(ARGV[1]) * 1000 then return 1 end
end`

// A push whose answer comes after the client's read timeout was stored all
// the same, and the client sends it again: that second try must report the
// version the first one stored, not a conflict ("nothing was stored" would
// be false, and a user pushing again would store it twice).
func TestPushRetriedAfterATimeoutReportsItsVersion(t *testing.T) {
	srv := redistest.Start(t)
	c := dial(t, srv.URL()) // a 1 s read timeout and one retry, as a gateway's
	t.Cleanup(func() { c.Close() })
	s := rulesource.New(c, "sluice-test:rulesource:slow")
	ctx := ctxT(t)
	if _, err := s.Push(ctx, []byte("a: 1\n"), 0); err != nil {
		t.Fatal(err)
	}
	busy := make(chan error, 1)
	go func() {
		_, err := srv.Do("EVAL", busyScript, "0", "1500")
		busy <- err
	}()
	time.Sleep(100 * time.Millisecond) // the busy script runs
	d, err := s.Push(ctx, []byte("b: 2\n"), 1)
	if err := <-busy; err != nil {
		t.Fatalf("busy script: %v", err)
	}
	if err != nil || d.Version != 2 {
		t.Fatalf("Push based on 1 while Redis was slow = %+v, %v; want version 2 (it was stored)", d, err)
	}
	got, err := s.Pull(ctx)
	if err != nil || got.Version != 2 || string(got.Text) != "b: 2\n" {
		t.Fatalf("Pull = %+v, %v; want version 2, stored once", got, err)
	}
}

// An ACL user of Redis 7 has no channel permission unless given one
// (acl-pubsub-default resetchannels): the push's publication is refused.
// The document is stored all the same (a script is not rolled back), so the
// push must say so, not fail; the gateways see it at their next poll.
func TestPushByAUserThatMayNotPublish(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("ACL", "SETUSER", "pusher", "on", ">pw", "~*", "+@all", "resetchannels"); err != nil {
		t.Fatal(err)
	}
	c := dial(t, "redis://pusher:pw@"+srv.Addr()+"/0")
	t.Cleanup(func() { c.Close() })
	s := rulesource.New(c, "sluice-test:rulesource:acl")
	ctx := ctxT(t)
	d, err := s.Push(ctx, []byte("a: 1\n"), 0)
	if err != nil || d.Version != 1 {
		t.Fatalf("Push by a user that may not publish = %+v, %v; want version 1", d, err)
	}
	if got, err := s.Pull(ctx); err != nil || got.Version != 1 || string(got.Text) != "a: 1\n" {
		t.Fatalf("Pull = %+v, %v; want version 1", got, err)
	}
	// A gateway of that user cannot subscribe either: its poll delivers.
	r := watchFor(t, s, rulesource.WatchOptions{Known: d, Poll: 50 * time.Millisecond})
	if d, err := s.Push(ctx, []byte("a: 2\n"), 1); err != nil || d.Version != 2 {
		t.Fatalf("second Push = %+v, %v; want version 2", d, err)
	}
	waitFor(t, 2*time.Second, "version 2 delivered by the poll", func() bool { d, _ := r.last(); return d.Version == 2 })
}
