package config

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

func TestWatchFilesSeesEachFileAndStopsAllOnASetupError(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.pem"), filepath.Join(dir, "b.pem")
	write(t, a, "a1")
	write(t, b, "b1")
	ctx, cancel := context.WithCancel(context.Background())
	changes, ready, done := make(chan struct{}, 10), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- WatchFiles(ctx, []string{a, b}, 20*time.Millisecond, zerolog.Nop(), func() { changes <- struct{}{} }, ready)
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	for _, f := range []string{a, b} {
		write(t, f, "v2")
		select {
		case <-changes:
		case <-time.After(10 * time.Second):
			t.Fatalf("change of %s not seen", f)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("after cancel: %v", err)
	}

	err := WatchFiles(context.Background(), []string{a, filepath.Join(dir, "missing", "c.pem")}, time.Millisecond, zerolog.Nop(), func() {}, nil)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a file in a missing directory: err %v", err)
	}
}
