package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"
)

// Watch calls onChange whenever the content of the file at path changes,
// until ctx is done; then it returns nil. It returns an error only if the
// watch cannot be set up (e.g. the directory does not exist).
//
// It watches the file's directory, not the file, so that in-place writes,
// editors' rename-over saves, delete+recreate and Kubernetes ConfigMap
// symlink swaps ("..data" replaced) are all seen; if path is a symlink whose
// target lives in another directory, that directory is watched too. Events
// are debounced: onChange runs once the directory has been quiet for
// debounce, and only if the file's content hash differs from the last one
// seen (a file that disappears counts as a change, so a reload can report
// it). onChange runs on Watch's goroutine, never concurrently with itself.
// Changes made before Watch starts are not reported: Load first, then Watch.
func Watch(ctx context.Context, path string, debounce time.Duration, log zerolog.Logger, onChange func()) error {
	return watch(ctx, path, debounce, log, onChange, nil)
}

// watch is Watch, closing ready (if not nil) once the watch is in place, so
// that tests know when a change will be seen.
func watch(ctx context.Context, path string, debounce time.Duration, log zerolog.Logger, onChange func(), ready chan<- struct{}) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("config: watch %s: %w", path, err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("config: watch %s: %w", path, err)
	}
	defer w.Close()
	fw := &fileWatch{path: abs, dir: filepath.Dir(abs), w: w, log: log}
	if err := w.Add(fw.dir); err != nil {
		return fmt.Errorf("config: watch %s: %w", fw.dir, err)
	}
	fw.follow()
	last := fileHash(abs)
	if ready != nil {
		close(ready)
	}

	timer := time.NewTimer(debounce)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if fw.relevant(ev.Name) {
				timer.Reset(debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			// An overflow may have dropped our event: look at the file anyway.
			log.Warn().Err(err).Str("file", path).Msg("config: watch error")
			timer.Reset(debounce)
		case <-timer.C:
			fw.follow()
			if h := fileHash(abs); h != last {
				last = h
				onChange()
			}
		}
	}
}

// fileWatch tracks which directories and names matter for one file.
type fileWatch struct {
	path      string // absolute path as given (may be a symlink)
	dir       string // its directory, always watched
	targetDir string // the directory of the symlink's target, if elsewhere
	target    string // the resolved file
	w         *fsnotify.Watcher
	log       zerolog.Logger
}

// relevant filters events by name: the file itself, Kubernetes' "..data"
// style entries next to it, and the resolved target.
func (f *fileWatch) relevant(name string) bool {
	switch {
	case name == f.path, name == f.target:
		return true
	case filepath.Dir(name) == f.dir && strings.HasPrefix(filepath.Base(name), ".."):
		return true
	}
	return false
}

// follow resolves the symlink chain of the file and watches its target's
// directory when that lies outside the file's own directory.
func (f *fileWatch) follow() {
	target, err := filepath.EvalSymlinks(f.path)
	if err != nil {
		return // gone for now; the directory watch will see it come back
	}
	f.target = target
	td := filepath.Dir(target)
	if td == f.targetDir {
		return
	}
	if f.targetDir != "" && f.targetDir != f.dir {
		_ = f.w.Remove(f.targetDir) // already gone with its directory is fine
	}
	f.targetDir = ""
	// Kubernetes' ..2026_xx directories live inside dir and are replaced, not
	// written: watching the directory itself covers them.
	if td == f.dir || strings.HasPrefix(td, f.dir+string(filepath.Separator)+"..") {
		return
	}
	if err := f.w.Add(td); err != nil {
		f.log.Warn().Err(err).Str("dir", td).Msg("config: cannot watch the symlink target's directory")
		return
	}
	f.targetDir = td
}

// fileHash returns the SHA-256 of the file's content (at most MaxFileSize+1
// bytes), or a marker for a file that cannot be read.
func fileHash(path string) string {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "missing"
		}
		return "unreadable: " + err.Error()
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, MaxFileSize+1)); err != nil {
		return "unreadable: " + err.Error()
	}
	return string(h.Sum(nil))
}
