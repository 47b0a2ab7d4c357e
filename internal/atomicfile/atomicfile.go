// Package atomicfile replaces a file so that a reader (or a watcher) sees
// either the old content or the new one, never a torn write.
package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrChanged is returned by WriteIfUnchanged when the file no longer holds
// the bytes the caller based its new content on; nothing was written.
var ErrChanged = errors.New("atomicfile: the file changed on disk; nothing was written")

// Write replaces path with data: a temporary file in the same directory is
// written, synced and renamed over path. An existing file keeps its
// permission bits and, where the process may set them, its owner and group;
// a new one gets perm. It is safe to call from any goroutine, but two writers
// of one path race (the last rename wins).
func Write(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, false, nil)
}

// WriteIfUnchanged is Write for a read-modify-write: just before the rename
// it reads path again and, if its bytes are no longer old (another writer
// saved it meanwhile), removes the temporary file and returns ErrChanged.
// The check runs after the slow part (write and fsync), so the window in
// which a foreign write can still be lost is one read and one rename long.
func WriteIfUnchanged(path string, data, old []byte, perm fs.FileMode) error {
	return write(path, data, perm, true, old)
}

// write is Write, and with check, WriteIfUnchanged.
func write(path string, data []byte, perm fs.FileMode, check bool, old []byte) (err error) {
	fi, statErr := os.Stat(path)
	if statErr == nil {
		perm = fi.Mode().Perm()
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	if statErr == nil {
		// The rename would otherwise hand the file to this process's user:
		// a gateway run as root would take an operator's file away from them.
		if err = keepOwner(f, fi); err != nil {
			return fmt.Errorf("atomicfile: %w", err)
		}
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	if check {
		same, rerr := holds(path, old)
		if rerr != nil {
			return fmt.Errorf("atomicfile: %w", rerr)
		}
		if !same {
			return ErrChanged
		}
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	// The rename is durable only once the directory is synced; a failure here
	// leaves a correct file, so it is not reported.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// holds reports whether the regular file at path holds exactly old; a
// FIFO or device put there holds nothing of it, and is not read.
func holds(path string, old []byte) (bool, error) {
	f, fi, err := OpenForRead(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if !fi.Mode().IsRegular() || fi.Size() != int64(len(old)) {
		return false, nil
	}
	cur, err := io.ReadAll(io.LimitReader(f, int64(len(old))+1))
	return err == nil && bytes.Equal(cur, old), err
}
