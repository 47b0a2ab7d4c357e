package config

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// seenWithin polls w's callbacks until the last saw content; it reports
// false after d, so that a lost watch fails the test quickly.
func seenWithin(w *watcher, content string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if seen := w.calls(); len(seen) > 0 && seen[len(seen)-1] == content {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// TestWatchSurvivesItsDirectoryReplaced: the rules file's directory
// deleted (or moved away) and made again, the file written into the new
// one, is seen, and so are later writes: inotify drops a deleted
// directory's watch, and the watch used to stay blind until a restart.
func TestWatchSurvivesItsDirectoryReplaced(t *testing.T) {
	for _, tt := range []struct {
		name string
		// replace removes dir (under base) and makes it again, empty.
		replace func(t *testing.T, base, dir string)
	}{
		{"rm -rf dir; mkdir dir", func(t *testing.T, _, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"mv dir away; mkdir dir", func(t *testing.T, base, dir string) {
			if err := os.Rename(dir, filepath.Join(base, "old")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"its parent too: rm -rf a; mkdir -p a/b", func(t *testing.T, base, dir string) {
			if err := os.RemoveAll(filepath.Join(base, "a")); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"gone a while, then back in two steps", func(t *testing.T, base, dir string) {
			if err := os.RemoveAll(filepath.Join(base, "a")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // five debounce periods: the watch settles on base
			if err := os.Mkdir(filepath.Join(base, "a"), 0o755); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			base := t.TempDir()
			dir := filepath.Join(base, "a", "b")
			path := filepath.Join(dir, "rules.yaml")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, path, "v1")
			w := startWatch(t, path, 20*time.Millisecond)
			defer w.stop()

			tt.replace(t, base, dir)
			write(t, path, "v2")
			if !seenWithin(w, "v2", 2*time.Second) {
				t.Fatalf("the file written into the new directory was not seen; callbacks saw %q", w.calls())
			}
			write(t, path, "v3")
			if !seenWithin(w, "v3", 2*time.Second) {
				t.Fatalf("a write after the directory came back was not seen; callbacks saw %q", w.calls())
			}
		})
	}
}

// TestWatchSurvivesItsSymlinkTargetReplaced: the rules file reached
// through a symlink (a release directory's "current", a file linked from
// elsewhere), the directory the link points into deleted and made again
// (at once, or gone past the debounce), the file written into it: seen,
// and so are later writes. The dead watch
// of that directory was kept as if alive, and no change was seen again
// until a restart or SIGHUP.
func TestWatchSurvivesItsSymlinkTargetReplaced(t *testing.T) {
	for _, tt := range []struct {
		name string
		// layout makes the link under base and returns the path watched
		// and the directory the file really lives in.
		layout func(t *testing.T, base string) (path, real string)
	}{
		{"the directory is a link: current -> relA", func(t *testing.T, base string) (string, string) {
			real := filepath.Join(base, "relA")
			if err := os.Mkdir(real, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("relA", filepath.Join(base, "current")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "current", "rules.yaml"), real
		}},
		{"the file is a link into another directory", func(t *testing.T, base string) (string, string) {
			real, conf := filepath.Join(base, "rel"), filepath.Join(base, "conf")
			for _, d := range []string{real, conf} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink("../rel/rules.yaml", filepath.Join(conf, "rules.yaml")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(conf, "rules.yaml"), real
		}},
	} {
		for _, gone := range []time.Duration{0, 300 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s, gone %v", tt.name, gone), func(t *testing.T) {
				defer goleak.VerifyNone(t)
				base := t.TempDir()
				path, real := tt.layout(t, base)
				write(t, filepath.Join(real, "rules.yaml"), "v1")
				w := startWatch(t, path, 20*time.Millisecond)
				defer w.stop()

				if err := os.RemoveAll(real); err != nil {
					t.Fatal(err)
				}
				// Gone past the debounce: the watch settles on a missing file,
				// and only a watch of a parent sees the directory come back.
				time.Sleep(gone)
				if err := os.Mkdir(real, 0o755); err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(real, "rules.yaml"), "v2")
				if !seenWithin(w, "v2", 2*time.Second) {
					t.Fatalf("the file written into the new directory was not seen; callbacks saw %q", w.calls())
				}
				for _, v := range []string{"v3", "v4"} {
					time.Sleep(50 * time.Millisecond)
					write(t, filepath.Join(real, "rules.yaml"), v)
					if !seenWithin(w, v, 2*time.Second) {
						t.Fatalf("a write after the directory came back was not seen; callbacks saw %q", w.calls())
					}
				}
			})
		}
	}
}

// TestWatchSurvivesALinksDirectoryReplaced: the rules file is a link to
// ../w2/cfg/current/rules.yaml and current links to a release directory.
// The directory holding current (not the file's, nor the release's) is
// deleted and made again with current pointing at another release, at
// once or gone past the debounce: the new release is seen, and so are a
// later write and a later swap of current. The deleted directory's dead
// watch was kept as alive and nothing watched where it came back: no
// change was seen again, not even after a SIGHUP's reload.
func TestWatchSurvivesALinksDirectoryReplaced(t *testing.T) {
	for _, gone := range []time.Duration{0, 300 * time.Millisecond} {
		t.Run(fmt.Sprintf("gone %v", gone), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			base := t.TempDir()
			for _, d := range []string{"w", "w2/cfg", "relA", "relB"} {
				if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			write(t, filepath.Join(base, "relA", "rules.yaml"), "A1")
			write(t, filepath.Join(base, "relB", "rules.yaml"), "B1")
			link := func(to string) {
				cur := filepath.Join(base, "w2", "cfg", "current")
				_ = os.Remove(cur)
				if err := os.Symlink(to, cur); err != nil {
					t.Fatal(err)
				}
			}
			link("../../relA")
			path := filepath.Join(base, "w", "rules.yaml")
			if err := os.Symlink("../w2/cfg/current/rules.yaml", path); err != nil {
				t.Fatal(err)
			}
			w := startWatch(t, path, 20*time.Millisecond)
			defer w.stop()

			if err := os.RemoveAll(filepath.Join(base, "w2", "cfg")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(gone)
			if err := os.Mkdir(filepath.Join(base, "w2", "cfg"), 0o755); err != nil {
				t.Fatal(err)
			}
			link("../../relB")
			if !seenWithin(w, "B1", 2*time.Second) {
				t.Fatalf("the link made in the new directory was not followed; callbacks saw %q", w.calls())
			}
			time.Sleep(50 * time.Millisecond)
			write(t, filepath.Join(base, "relB", "rules.yaml"), "B2")
			if !seenWithin(w, "B2", 2*time.Second) {
				t.Fatalf("a write after the directory came back was not seen; callbacks saw %q", w.calls())
			}
			time.Sleep(50 * time.Millisecond)
			link("../../relA")
			if !seenWithin(w, "A1", 2*time.Second) {
				t.Fatalf("a swap of the link after the directory came back was not seen; callbacks saw %q", w.calls())
			}
		})
	}
}

// TestWatchFollowsALinkToAReleaseMadeLater: the rules file is a link into
// rel/A; it is re-pointed at rel/C, which does not exist yet, and rel/C is
// made a moment later with the file in it: the new file is seen, and a
// later edit of it too. Nothing watched rel, where C appeared, so neither
// was seen until a SIGHUP.
func TestWatchFollowsALinkToAReleaseMadeLater(t *testing.T) {
	defer goleak.VerifyNone(t)
	base := t.TempDir()
	for _, d := range []string{"cfg", "rel/A"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(base, "rel", "A", "rules.yaml"), "A1")
	path := filepath.Join(base, "cfg", "rules.yaml")
	if err := os.Symlink(filepath.Join(base, "rel", "A", "rules.yaml"), path); err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, path, 20*time.Millisecond)
	defer w.stop()
	tmp := path + ".new"
	if err := os.Symlink(filepath.Join(base, "rel", "C", "rules.yaml"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // ln -sfn
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := os.MkdirAll(filepath.Join(base, "rel", "C"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(base, "rel", "C", "rules.yaml"), "C1")
	if !seenWithin(w, "C1", 3*time.Second) {
		t.Fatalf("the release made after the link was not seen; callbacks saw %q", w.calls())
	}
	time.Sleep(50 * time.Millisecond)
	write(t, filepath.Join(base, "rel", "C", "rules.yaml"), "C2")
	if !seenWithin(w, "C2", 3*time.Second) {
		t.Fatalf("an edit of the new release was not seen; callbacks saw %q", w.calls())
	}
}
