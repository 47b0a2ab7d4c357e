package config

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestWatchLoadedReportsAnEarlierChange: a change made after the file
// was loaded (its state taken) and before the watch was in place is
// reported once the watch starts; with no change, nothing is.
func TestWatchLoadedReportsAnEarlierChange(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change bool
	}{{"changed", true}, {"unchanged", false}} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(path, []byte("a: 1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			since := fileHash(path)
			if tt.change {
				if err := os.WriteFile(path, []byte("a: 2\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			calls := make(chan struct{}, 4)
			done := make(chan error, 1)
			go func() {
				done <- WatchLoaded(ctx, path, func() string { return since }, 20*time.Millisecond, zerolog.Nop(), func() { calls <- struct{}{} })
			}()
			defer func() { cancel(); <-done }()
			select {
			case <-calls:
				if !tt.change {
					t.Fatal("reported a change with none made")
				}
			case <-time.After(time.Second):
				if tt.change {
					t.Fatal("a change made before the watch started was not reported")
				}
			}
		})
	}
}

// TestWatchSurvivesAFIFO: the rules file replaced for a while by a
// FIFO (no writer) must not block the watch: once a regular file is back,
// its change is reported.
func TestWatchSurvivesAFIFO(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 16)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- watch(ctx, path, 20*time.Millisecond, zerolog.Nop(), func() { calls <- struct{}{} }, ready)
	}()
	<-ready
	if err := os.Rename(fifo, path); err != nil {
		t.Fatal(err)
	}
	select { // the FIFO is a change (Load refuses it, and says why)
	case <-calls:
	case <-time.After(5 * time.Second):
		t.Fatal("the FIFO in the file's place was not reported")
	}
	tmp := filepath.Join(dir, "new")
	if err := os.WriteFile(tmp, []byte("a: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	select {
	case <-calls:
	case <-time.After(5 * time.Second):
		// Unblock a watch stuck opening the FIFO, so the test can end.
		t.Error("the regular file back in place was not reported")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not return after cancel: stuck on the FIFO")
	}
}

// TestWatchLoadedConvergesAfterAWriteDuringALoad: the watch looks at the
// file (B), the loader then reads it as another writer has just saved A
// over it, and B lands again before the watch's next look. The watch,
// comparing with its own last look (B), stayed silent, and the gateway ran
// A for good while the file held B, with no error (twice in eight storms of
// 3 MB files). Compared with what the loader read, it reports B.
func TestWatchLoadedConvergesAfterAWriteDuringALoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("A"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	_, read, _ := ReadState(path)
	content, first := "A", true
	loaded := func() string { mu.Lock(); defer mu.Unlock(); return read }
	load := func() {
		mu.Lock()
		defer mu.Unlock()
		if first { // another writer saves A just as the loader reads...
			first = false
			_ = os.WriteFile(path, []byte("A"), 0o644)
		}
		data, st, _ := ReadState(path)
		content, read = string(data), st
		if content == "A" { // ...and the first writer's B lands again
			_ = os.WriteFile(path, []byte("B"), 0o644)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- WatchLoaded(ctx, path, loaded, 30*time.Millisecond, zerolog.Nop(), load) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // the watch in place
	if err := os.WriteFile(path, []byte("B"), 0o644); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		c := content
		mu.Unlock()
		if c == "B" {
			return
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Fatalf("the file holds B, the loader is left on %q", content)
}
