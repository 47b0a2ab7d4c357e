package rulesource_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/internal/redistest"
	"sluice/rulesource"
)

// recorder collects what a Watch delivers.
type recorder struct {
	mu     sync.Mutex
	docs   []rulesource.Doc
	errs   []error
	states []bool
}

func (r *recorder) onDoc(d rulesource.Doc, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	r.docs = append(r.docs, d)
}

func (r *recorder) onState(up bool, _ error) {
	r.mu.Lock()
	r.states = append(r.states, up)
	r.mu.Unlock()
}

func (r *recorder) last() (rulesource.Doc, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.docs) == 0 {
		return rulesource.Doc{}, 0
	}
	return r.docs[len(r.docs)-1], len(r.docs)
}

func (r *recorder) lastState() (up, known bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return false, false
	}
	return r.states[len(r.states)-1], true
}

func watchFor(t *testing.T, s *rulesource.Store, o rulesource.WatchOptions) *recorder {
	r := &recorder{}
	o.OnDoc, o.OnState = r.onDoc, r.onState
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Watch(ctx, o); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// With the poll turned off (an hour), only the publication can deliver:
// each push arrives, in order, well within a second.
func TestWatchDeliversPushesByPublication(t *testing.T) {
	c := client(t, sharedRedis)
	s := rulesource.New(c, testKey(t, c))
	ctx := ctxT(t)
	first, err := s.Push(ctx, []byte("v: 1\n"), 0)
	if err != nil {
		t.Fatal(err)
	}
	r := watchFor(t, s, rulesource.WatchOptions{Known: first, Poll: time.Hour})
	waitFor(t, 5*time.Second, "watch up", func() bool { up, ok := r.lastState(); return ok && up })
	// The subscription is made on Watch's goroutine; a push before it is
	// in place would only be seen by the (disabled) poll.
	waitFor(t, 5*time.Second, "subscribed", func() bool {
		n, _ := c.PubSubNumSub(ctx, s.Key()+":changed").Result()
		return n[s.Key()+":changed"] > 0
	})
	var worst time.Duration
	for i := int64(1); i <= 5; i++ {
		d, err := s.Push(ctx, []byte("v: x\n"), i)
		if err != nil {
			t.Fatal(err)
		}
		took := waitFor(t, time.Second, "a pushed version delivered", func() bool {
			got, _ := r.last()
			return got.Version == d.Version
		})
		worst = max(worst, took)
	}
	if _, n := r.last(); n != 5 {
		t.Fatalf("%d deliveries for 5 pushes (the known first version must not be delivered)", n)
	}
	t.Logf("slowest delivery by publication: %v", worst)
}

// A write that does not publish (redis-cli HSET) is found by the poll.
func TestWatchPollFindsAnUnpublishedWrite(t *testing.T) {
	c := client(t, sharedRedis)
	key := testKey(t, c)
	s := rulesource.New(c, key)
	r := watchFor(t, s, rulesource.WatchOptions{Poll: 50 * time.Millisecond})
	waitFor(t, 5*time.Second, "watch up", func() bool { up, ok := r.lastState(); return ok && up })
	if err := c.HSet(ctxT(t), key, "version", 4, "doc", "by: hand\n").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Second, "the hand-written version delivered", func() bool {
		d, _ := r.last()
		return d.Version == 4 && string(d.Text) == "by: hand\n"
	})
	// A key that becomes no document is reported once, not every poll.
	if err := c.HSet(ctxT(t), key, "version", "five").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Second, "the bad version reported", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.errs) > 0
	})
	time.Sleep(300 * time.Millisecond) // six more polls
	r.mu.Lock()
	n := len(r.errs)
	var de *rulesource.DataError
	isData := errors.As(r.errs[0], &de)
	r.mu.Unlock()
	if n != 1 || !isData {
		t.Fatalf("%d errors delivered (first %v); want one DataError", n, r.errs)
	}
	if up, _ := r.lastState(); !up {
		t.Fatal("a bad key made the watch report Redis down")
	}
}

// Redis killed and started again (empty) on the same port: the watch says
// down, then up, and delivers what is written after, with no help. A key
// rebuilt from scratch reaches the version in force again with other text:
// the first read after the outage compares the text, not only the version.
func TestWatchFollowsRedisThroughARestart(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.URL())
	s := rulesource.New(c, "sluice:rules")
	ctx := ctxT(t)
	v1, err := s.Push(ctx, []byte("before: outage\n"), 0)
	if err != nil {
		t.Fatal(err)
	}
	r := watchFor(t, s, rulesource.WatchOptions{Known: v1, Poll: 50 * time.Millisecond, Timeout: 200 * time.Millisecond})
	waitFor(t, 5*time.Second, "watch up", func() bool { up, ok := r.lastState(); return ok && up })
	seenBefore := s.LastSeen()

	srv.Kill()
	waitFor(t, 5*time.Second, "watch down after the kill", func() bool { up, _ := r.lastState(); return !up })
	time.Sleep(200 * time.Millisecond)
	if gap := time.Since(s.LastSeen()); gap < 150*time.Millisecond {
		t.Fatalf("LastSeen %v ago while Redis is down", gap)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "watch up again", func() bool { up, _ := r.lastState(); return up })
	if !s.LastSeen().After(seenBefore) {
		t.Fatal("LastSeen did not move after Redis came back")
	}
	// The restarted Redis is empty: the first push is version 1 again.
	rebuilt, err := s.Push(ctx, []byte("after: outage\n"), 0)
	if err != nil || rebuilt.Version != v1.Version {
		t.Fatalf("push on the new Redis = %+v, %v; want version %d", rebuilt, err, v1.Version)
	}
	waitFor(t, 2*time.Second, "the rebuilt document delivered", func() bool {
		d, _ := r.last()
		return string(d.Text) == "after: outage\n"
	})
	// And changes flow by publication and poll as before.
	v2, err := s.Push(ctx, []byte("later\n"), rebuilt.Version)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Second, "a push after the restart delivered", func() bool { d, _ := r.last(); return d.Version == v2.Version })
	r.mu.Lock()
	t.Logf("states seen: %v", r.states)
	r.mu.Unlock()
}

// A watch that starts while Redis is down says so first, then picks up the
// document once Redis answers.
func TestWatchStartsWhileRedisIsDown(t *testing.T) {
	srv := redistest.Start(t)
	url := srv.URL()
	srv.Kill()
	c := dial(t, url)
	defer c.Close()
	s := rulesource.New(c, "sluice:rules")
	r := watchFor(t, s, rulesource.WatchOptions{Poll: 50 * time.Millisecond, Timeout: 200 * time.Millisecond})
	waitFor(t, 5*time.Second, "down reported", func() bool { up, ok := r.lastState(); return ok && !up })
	if !s.LastSeen().IsZero() {
		t.Fatal("LastSeen set although Redis never answered")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	other := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer other.Close()
	if err := other.HSet(ctxT(t), "sluice:rules", "version", 1, "doc", "x: 1\n").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the document delivered once Redis is up", func() bool { d, _ := r.last(); return d.Version == 1 })
}

// A watch that starts knowing v1 (a gateway serving its cache) while the
// key holds something else says so before it says Redis is up: a caller
// that takes "up, with nothing delivered" to mean the key holds v1 must
// never take it so while the key holds v2, a bad value or nothing. The
// cases that deliver come first; the last delivers nothing and is up.
func TestWatchDeliversWhatTheKeyHoldsBeforeUp(t *testing.T) {
	c := client(t, sharedRedis)
	ctx := ctxT(t)
	v1 := rulesource.Doc{Version: 1, Text: []byte("cached: 1\n")}
	for _, tc := range []struct {
		name string
		set  func(key string) error
		want string // the first event: "doc N", "error" or "up"
	}{
		{"a newer version", func(k string) error {
			return c.HSet(ctx, k, "version", 2, "doc", "newer: 2\n").Err()
		}, "doc 2"},
		{"the same version, other text", func(k string) error {
			return c.HSet(ctx, k, "version", 1, "doc", "rebuilt: 1\n").Err()
		}, "doc 1"},
		{"no document", func(k string) error { return nil }, "doc 0"},
		{"not a document", func(k string) error { return c.Set(ctx, k, "junk", 0).Err() }, "error"},
		{"the version known", func(k string) error {
			return c.HSet(ctx, k, "version", 1, "doc", string(v1.Text)).Err()
		}, "up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := testKey(t, c)
			if err := tc.set(key); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var events []string
			add := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
			ctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				rulesource.New(c, key).Watch(ctx, rulesource.WatchOptions{Known: v1, Poll: time.Hour,
					OnDoc: func(d rulesource.Doc, err error) {
						if err != nil {
							add("error")
							return
						}
						add("doc " + strconv.FormatInt(d.Version, 10))
					},
					OnState: func(up bool, _ error) {
						if up {
							add("up")
						}
					}})
			}()
			defer func() { cancel(); <-done }()
			waitFor(t, 5*time.Second, "up", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return slices.Contains(events, "up")
			})
			mu.Lock()
			defer mu.Unlock()
			if events[0] != tc.want {
				t.Errorf("events %v, want %q first", events, tc.want)
			}
		})
	}
}
