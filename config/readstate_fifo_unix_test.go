//go:build unix

package config

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadStateNeverBlocksOnAFIFOSwappedIn: a FIFO renamed over the rules
// file between a Stat and an open blocked the open (and the reload, and
// every reload and /readyz after it) for ever once the FIFO was unlinked.
// The file opened is the one judged, so a reader always returns.
func TestReadStateNeverBlocksOnAFIFOSwappedIn(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte("listen: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop, swapped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(swapped)
		tmp := filepath.Join(dir, "tmp")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				_ = syscall.Mkfifo(tmp, 0o644)
			} else {
				_ = os.WriteFile(tmp, []byte("listen: x\n"), 0o644)
			}
			_ = os.Rename(tmp, path)
		}
	}()
	defer func() { close(stop); <-swapped }()
	reads := 0
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); reads++ {
		done := make(chan struct{})
		go func() { _, _, _ = ReadState(path); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Fatalf("ReadState blocked on a FIFO renamed over the file, after %d reads", reads)
		}
	}
}
