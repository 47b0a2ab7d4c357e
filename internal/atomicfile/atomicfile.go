// Package atomicfile replaces a file so that a reader (or a watcher) sees
// either the old content or the new one, never a torn write.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data: a temporary file in the same directory is
// written, synced and renamed over path. An existing file keeps its
// permission bits; a new one gets perm. It is safe to call from any
// goroutine, but two writers of one path race (the last rename wins).
func Write(path string, data []byte, perm fs.FileMode) (err error) {
	if fi, err := os.Stat(path); err == nil {
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
	if err = f.Sync(); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
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
