package config

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestWatchSinceReportsAnEarlierChange: a change made after the file
// was loaded (FileState taken) and before the watch was in place is
// reported once the watch starts; with no change, nothing is.
func TestWatchSinceReportsAnEarlierChange(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change bool
	}{{"changed", true}, {"unchanged", false}} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(path, []byte("a: 1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			since := FileState(path)
			if tt.change {
				if err := os.WriteFile(path, []byte("a: 2\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			calls := make(chan struct{}, 4)
			done := make(chan error, 1)
			go func() {
				done <- WatchSince(ctx, path, since, 20*time.Millisecond, zerolog.Nop(), func() { calls <- struct{}{} })
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
