package admin

import (
	"fmt"
	"os"
	"path/filepath"
)

// writeFileAtomic replaces path with data so that a reader (or the config
// watcher) sees either the old file or the new one, never a torn write: a
// temporary file in the same directory is written, synced and renamed over
// path, keeping path's permission bits.
func writeFileAtomic(path string, data []byte) (err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("admin: writing rules file: %w", err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("admin: writing rules file: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("admin: writing rules file: %w", err)
	}
	if err = f.Chmod(fi.Mode().Perm()); err != nil {
		return fmt.Errorf("admin: writing rules file: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("admin: writing rules file: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("admin: writing rules file: %w", err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("admin: writing rules file: %w", err)
	}
	// The rename is durable only once the directory is synced; a failure here
	// leaves a correct file, so it is not reported.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
