package config

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

// watcher runs watch on a file and records the content the file had at each
// callback. Real time is used here on purpose: fsnotify is the thing under test.
type watcher struct {
	t      *testing.T
	mu     sync.Mutex
	seen   []string
	cancel context.CancelFunc
	done   chan error
}

func startWatch(t *testing.T, path string, debounce time.Duration) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{t: t, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		w.done <- watch(ctx, path, debounce, zerolog.Nop(), func() {
			b, err := os.ReadFile(path)
			if err != nil {
				b = []byte("<" + err.Error() + ">")
			}
			w.mu.Lock()
			w.seen = append(w.seen, string(b))
			w.mu.Unlock()
		}, ready)
	}()
	select {
	case <-ready:
	case err := <-w.done:
		t.Fatalf("watch returned early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not start")
	}
	return w
}

func (w *watcher) calls() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

// waitFor polls until a callback has seen content, or fails after a deadline.
func (w *watcher) waitFor(content string) []string {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		seen := w.calls()
		if len(seen) > 0 && seen[len(seen)-1] == content {
			return seen
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.t.Fatalf("no callback saw %q; callbacks saw %q", content, w.calls())
	return nil
}

// stop cancels the watch and checks that it returns nil promptly.
func (w *watcher) stop() {
	w.t.Helper()
	w.cancel()
	select {
	case err := <-w.done:
		if err != nil {
			w.t.Errorf("watch returned %v, want nil after cancel", err)
		}
	case <-time.After(10 * time.Second):
		w.t.Fatal("watch did not return after cancel")
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWatchSeesEveryKindOfSave(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := []struct {
		name string
		// setup creates the watched file with content "v1" and returns its path.
		setup func(t *testing.T, dir string) string
		// change replaces the content with "v2".
		change func(t *testing.T, dir, path string)
	}{
		{
			name:  "in-place write",
			setup: plainFile,
			change: func(t *testing.T, _, path string) {
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteString("v2"); err != nil {
					t.Fatal(err)
				}
				f.Close()
			},
		},
		{
			name:  "rename over (editor atomic save)",
			setup: plainFile,
			change: func(t *testing.T, dir, path string) {
				tmp := filepath.Join(dir, ".rules.yaml.swp")
				write(t, tmp, "v2")
				if err := os.Rename(tmp, path); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:  "delete and recreate",
			setup: plainFile,
			change: func(t *testing.T, _, path string) {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				write(t, path, "v2")
			},
		},
		{
			name:  "kubernetes configmap symlink swap",
			setup: configMap,
			change: func(t *testing.T, dir, _ string) {
				// What the kubelet does: new timestamped dir, new symlink, atomic rename over ..data.
				mkdirWrite(t, filepath.Join(dir, "..2026_v2"), "v2")
				symlink(t, "..2026_v2", filepath.Join(dir, "..data_tmp"))
				if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
					t.Fatal(err)
				}
				if err := os.RemoveAll(filepath.Join(dir, "..2026_v1")); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			// vim, cat > or the admin editor through the link: the
			// write lands in ..2026_v1, which was not watched.
			name:   "kubernetes configmap written through its link",
			setup:  configMap,
			change: func(t *testing.T, _, path string) { write(t, path, "v2") },
		},
		{
			name: "release directory symlink re-pointed (old release kept)",
			setup: func(t *testing.T, dir string) string {
				// -config dir/current/rules.yaml, current -> r1
				mkdirWrite(t, filepath.Join(dir, "r1"), "v1")
				symlink(t, "r1", filepath.Join(dir, "current"))
				return filepath.Join(dir, "current", "rules.yaml")
			},
			change: func(t *testing.T, dir, _ string) {
				mkdirWrite(t, filepath.Join(dir, "r2"), "v2")
				swapLink(t, "r2", filepath.Join(dir, "current"))
			},
		},
		{
			name: "symlink whose chain passes a re-pointed directory link",
			setup: func(t *testing.T, dir string) string {
				// dir/rules.yaml -> other/current/rules.yaml, current -> r1
				other := t.TempDir()
				mkdirWrite(t, filepath.Join(other, "r1"), "v1")
				symlink(t, "r1", filepath.Join(other, "current"))
				symlink(t, filepath.Join(other, "current", "rules.yaml"), filepath.Join(dir, "rules.yaml"))
				return filepath.Join(dir, "rules.yaml")
			},
			change: func(t *testing.T, dir, path string) {
				link, err := os.Readlink(path)
				if err != nil {
					t.Fatal(err)
				}
				other := filepath.Dir(filepath.Dir(link))
				mkdirWrite(t, filepath.Join(other, "r2"), "v2")
				swapLink(t, "r2", filepath.Join(other, "current"))
			},
		},
		{
			name: "symlink to a file in another directory, written in place",
			setup: func(t *testing.T, dir string) string {
				other := t.TempDir()
				write(t, filepath.Join(other, "real.yaml"), "v1")
				symlink(t, filepath.Join(other, "real.yaml"), filepath.Join(dir, "rules.yaml"))
				return filepath.Join(dir, "rules.yaml")
			},
			change: func(t *testing.T, dir, path string) {
				target, err := filepath.EvalSymlinks(path)
				if err != nil {
					t.Fatal(err)
				}
				write(t, target, "v2")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tt.setup(t, dir)
			w := startWatch(t, path, 50*time.Millisecond)
			defer w.stop()
			tt.change(t, dir, path)
			seen := w.waitFor("v2")
			// delete+recreate may also report the moment the file was gone.
			for _, s := range seen[:len(seen)-1] {
				if s == "v1" || s == "v2" {
					t.Errorf("callbacks saw %q: a callback fired without a content change", seen)
				}
			}
		})
	}
}

// swapLink re-points link to target atomically (ln -sfn and a rename, as
// release-directory deploys and the kubelet do).
func swapLink(t *testing.T, target, link string) {
	t.Helper()
	tmp := link + ".tmp"
	symlink(t, target, tmp)
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

// A file rewritten without pause (an agent re-rendering it every 50 ms) is
// still reported while the rewrites go on: the debounce has a maximum wait.
func TestWatchReportsUnderContinuousWrites(t *testing.T) {
	dir := t.TempDir()
	path := plainFile(t, dir)
	w := startWatch(t, path, 100*time.Millisecond)
	defer w.stop()
	// The writes go on until a callback sees v2, for up to 10 of the
	// debounce's maximum waits (1 s each): a callback may read the file
	// while a write has truncated it (""), and on a busy machine the next
	// maximum wait can end after any fixed time. Without a maximum wait no
	// callback comes while the writes go on, however long.
	start := time.Now()
	for time.Since(start) < 10*time.Second {
		write(t, path, "v2")
		time.Sleep(50 * time.Millisecond)
		if seen := w.calls(); len(seen) > 0 && seen[len(seen)-1] == "v2" {
			return
		}
	}
	t.Errorf("the file changed to v2 %v ago and was rewritten every 50 ms since: callbacks saw %q",
		time.Since(start).Round(time.Millisecond), w.calls())
}

func plainFile(t *testing.T, dir string) string {
	p := filepath.Join(dir, "rules.yaml")
	write(t, p, "v1")
	return p
}

func mkdirWrite(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "rules.yaml"), content)
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestWatchIgnoresUnrelatedEvents: other files in the directory and rewrites
// with identical content do not call onChange.
func TestWatchIgnoresUnrelatedEvents(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	path := plainFile(t, dir)
	w := startWatch(t, path, 20*time.Millisecond)
	defer w.stop()

	write(t, filepath.Join(dir, "other.yaml"), "x")
	write(t, filepath.Join(dir, "..hidden"), "x") // passes the name filter, but rules.yaml is unchanged
	write(t, path, "v1")                          // same content
	time.Sleep(200 * time.Millisecond)            // ten debounce periods: time for a wrong callback to fire
	write(t, path, "v2")
	if seen := w.waitFor("v2"); len(seen) != 1 {
		t.Errorf("callbacks saw %q, want only the real change", seen)
	}
}

// TestWatchDebouncesBursts: 100 quick writes give few callbacks, the last
// of which sees the final content.
func TestWatchDebouncesBursts(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	path := plainFile(t, dir)
	w := startWatch(t, path, 100*time.Millisecond)
	defer w.stop()
	for i := range 100 {
		write(t, path, fmt.Sprintf("burst %d", i))
	}
	seen := w.waitFor("burst 99")
	// 100 writes take a few ms; even on a loaded machine they should not span
	// more than a handful of 100 ms quiet periods.
	if len(seen) > 5 {
		t.Errorf("100 writes gave %d callbacks, want a few: %q", len(seen), seen)
	}
}

func TestWatchMissingDirectory(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "nope", "rules.yaml")
	err := Watch(context.Background(), path, time.Millisecond, zerolog.Nop(), func() {})
	if err == nil {
		t.Fatal("Watch on a missing directory returned nil")
	}
}

// TestWatchReportsDeletion: a deleted file is a change (the reload then logs
// the error and keeps the old rules).
func TestWatchReportsDeletion(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	path := plainFile(t, dir)
	w := startWatch(t, path, 20*time.Millisecond)
	defer w.stop()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(w.calls()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if seen := w.calls(); len(seen) != 1 || seen[0] == "v1" {
		t.Errorf("callbacks saw %q, want one for the missing file", seen)
	}
	write(t, path, "v1")
	w.waitFor("v1")
}

// A file over MaxDocumentBytes replaced by another is a change, although
// both begin with the same bytes: the watch looks at an oversized file's
// size and time, never reads it (both 16 and 64 MiB of zeros hashed alike
// when the first bytes were hashed, and the reload that reports the second
// never came).
func TestFileHashTellsOversizedFilesApart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	sizes := []int64{16 << 20, 64 << 20}
	seen := map[string]int64{}
	for _, size := range sizes {
		if err := os.Truncate(path, 0); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		h := fileHash(path)
		if prev, ok := seen[h]; ok {
			t.Errorf("a %d MiB file hashes as the %d MiB file before it: a watch sees no change", size>>20, prev>>20)
		}
		seen[h] = size
	}
}

// configMap lays dir out as a Kubernetes ConfigMap volume holding "v1":
// dir/..data -> ..2026_v1, dir/rules.yaml -> ..data/rules.yaml.
func configMap(t *testing.T, dir string) string {
	mkdirWrite(t, filepath.Join(dir, "..2026_v1"), "v1")
	symlink(t, "..2026_v1", filepath.Join(dir, "..data"))
	symlink(t, filepath.Join("..data", "rules.yaml"), filepath.Join(dir, "rules.yaml"))
	return filepath.Join(dir, "rules.yaml")
}
