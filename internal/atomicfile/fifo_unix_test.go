//go:build unix

package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestWriteIfUnchangedNeverBlocksOnAFIFO: a FIFO put where the file was
// holds none of its bytes, and is not read: a plain read of it blocked
// until a writer came, for ever once it was unlinked, and the admin
// editor's save with it.
func TestWriteIfUnchangedNeverBlocksOnAFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- WriteIfUnchanged(path, []byte("new"), []byte("old"), 0o644) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrChanged) {
			t.Errorf("a FIFO in the file's place: %v, want ErrChanged", err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the reader so the test ends.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("WriteIfUnchanged blocked on a FIFO in the file's place")
	}
}
