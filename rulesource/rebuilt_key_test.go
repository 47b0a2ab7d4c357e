package rulesource_test

import (
	"testing"
	"time"

	"sluice/internal/redistest"
	"sluice/rulesource"
)

// TestRebuiltKeySameVersionIsDelivered: the key is deleted and a new
// document pushed (it is version 1 again) between two looks of a watch
// that knew version 1: the publication of the new push must deliver it,
// not be taken for the version already known.
func TestRebuiltKeySameVersionIsDelivered(t *testing.T) {
	srv := redistest.Start(t)
	c := client(t, srv.URL())
	key := testKey(t, c)
	s := rulesource.New(c, key)
	ctx := ctxT(t)
	first, err := s.Push(ctx, []byte("v: old\n"), 0)
	if err != nil {
		t.Fatal(err)
	}
	r := watchFor(t, s, rulesource.WatchOptions{Known: first, Poll: time.Hour})
	waitFor(t, 5*time.Second, "watch up", func() bool { up, ok := r.lastState(); return ok && up })
	waitFor(t, 5*time.Second, "subscribed", func() bool {
		n, _ := c.PubSubNumSub(ctx, s.Key()+":changed").Result()
		return n[s.Key()+":changed"] > 0
	})
	// DEL and push in one transaction's time: no look of the watch between.
	if err := c.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	d, err := s.Push(ctx, []byte("v: new\n"), 0)
	if err != nil || d.Version != 1 {
		t.Fatalf("push: %v %v", d, err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if got, _ := r.last(); string(got.Text) == "v: new\n" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the rebuilt key's new document (version 1 again) was never delivered")
}
