package config

import (
	"context"
	"fmt"
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
// target lives in another directory, that directory is watched too. If the
// directory itself is deleted or moved away, its nearest existing ancestor is
// watched (and polled) until it is back, then the file is looked at. Events
// are debounced: onChange runs once the directory has been quiet for
// debounce, and only if the file's content hash differs from the last one
// seen (a file that disappears counts as a change, so a reload can report
// it). onChange runs on Watch's goroutine, never concurrently with itself.
// Changes made before Watch starts are not reported: Load first, then Watch.
func Watch(ctx context.Context, path string, debounce time.Duration, log zerolog.Logger, onChange func()) error {
	return watchFrom(ctx, path, debounce, log, onChange, nil, nil)
}

// WatchLoaded is Watch, comparing each look at the file with loaded(),
// the state (ReadState) of what the caller last loaded, rather than with
// the state the watch last saw: a reload that read a version written after
// the watch looked (and undone before its next look) is then told apart
// from the file, and reported, where the watch's own last look matched the
// file and stayed silent, leaving the gateway on a version no longer on
// disk (a save racing another at a few ms, twice in eight storms of 3 MB
// files).
func WatchLoaded(ctx context.Context, path string, loaded func() string, debounce time.Duration, log zerolog.Logger, onChange func()) error {
	return watchFrom(ctx, path, debounce, log, onChange, nil, loaded)
}

// watch is Watch, closing ready (if not nil) once the watch is in place, so
// that tests know when a change will be seen.
func watch(ctx context.Context, path string, debounce time.Duration, log zerolog.Logger, onChange func(), ready chan<- struct{}) error {
	return watchFrom(ctx, path, debounce, log, onChange, ready, nil)
}

// watchFrom is Watch, closing ready as watch does, and comparing with
// loaded() (if not nil) as WatchLoaded does.
func watchFrom(ctx context.Context, path string, debounce time.Duration, log zerolog.Logger, onChange func(), ready chan<- struct{}, loaded func() string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("config: watch %s: %w", path, err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("config: watch %s: %w", path, err)
	}
	defer w.Close()
	fw := &fileWatch{path: abs, dir: filepath.Dir(abs), extra: map[string]bool{}, w: w, log: log}
	if err := w.Add(fw.dir); err != nil {
		return fmt.Errorf("config: watch %s: %w", fw.dir, err)
	}
	fw.follow()
	last := fileHash(abs)
	changed := false
	if loaded != nil {
		// A change made after the caller loaded the file and before the
		// watch was in place is looked at once the loop runs.
		since := loaded()
		changed = since != "" && last != since
	}
	if ready != nil {
		close(ready)
	}

	timer := time.NewTimer(debounce)
	timer.Stop()
	// A file rewritten without pause (an agent re-rendering it every 50 ms)
	// would keep pushing a plain debounce back for ever: a burst is looked
	// at no later than maxWait after its first event.
	maxWait := 10 * debounce
	var burst time.Time // first event of the pending burst; zero: none
	kick := func() {
		now := time.Now()
		if burst.IsZero() {
			burst = now
		}
		timer.Reset(max(0, min(debounce, burst.Add(maxWait).Sub(now))))
	}
	if changed {
		kick()
	}
	// poll looks for the file's directory again while it is gone, in case
	// no watchable ancestor reports it coming back; nil while it is there.
	var poll *time.Ticker
	var pollC <-chan time.Time
	regain := func() {
		if !fw.regain() {
			if poll == nil {
				poll = time.NewTicker(dirPoll)
				pollC = poll.C
			}
			return
		}
		if poll != nil {
			poll.Stop()
			poll, pollC = nil, nil
		}
		// The file may have been written before the new watch was in place.
		kick()
	}
	defer func() {
		if poll != nil {
			poll.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if fw.gone(ev) || fw.lost && fw.onPath(ev.Name) {
				regain()
			}
			if fw.relevant(ev.Name) || fw.pathDirEvent(ev) {
				kick()
			}
		case <-pollC:
			regain()
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			// An overflow may have dropped our event: look at the file anyway.
			log.Warn().Err(err).Str("file", path).Msg("config: watch error")
			kick()
		case <-timer.C:
			burst = time.Time{}
			switch again := fw.follow(); {
			case again:
				// A directory on the way is watched anew: what was made in
				// it before the watch sent no event, so look again.
				kick()
			case fw.unresolved:
				// A link may point where nothing is watched (re-pointed at
				// a release made after it): look again in a while.
				timer.Reset(dirPoll)
			}
			h := fileHash(abs)
			if loaded != nil {
				last = loaded()
			}
			if h != last {
				last = h
				onChange()
			}
		}
	}
}

// dirPoll is how often a watch whose directory is gone looks for it again,
// besides the events of the nearest ancestor that still exists.
const dirPoll = time.Second

// fileWatch tracks which directories and names matter for one file.
type fileWatch struct {
	path   string          // absolute path as given (may be or pass through symlinks)
	dir    string          // its directory, watched whenever it exists
	lost   bool            // dir is gone (deleted or moved away): its watch went with it
	anchor string          // while lost: the nearest ancestor of dir watched for it to come back
	target string          // the resolved file
	links  map[string]bool // every symlink met resolving path: a swap of any re-points it
	extra  map[string]bool // directories watched besides dir: the links' and the target's
	// unresolved: the file could not be resolved when last followed (a
	// link to nothing yet); the watch looks again every dirPoll.
	unresolved bool
	w          *fsnotify.Watcher
	log        zerolog.Logger
}

// relevant filters events by name: the file itself, Kubernetes' "..data"
// style entries next to it, the resolved target, and any symlink on the way
// to it (a release directory's "current" re-pointed, say).
func (f *fileWatch) relevant(name string) bool {
	switch {
	case name == f.path, name == f.target, f.links[name]:
		return true
	case filepath.Dir(name) == f.dir && strings.HasPrefix(filepath.Base(name), ".."):
		return true
	}
	return false
}

// gone reports whether ev says the file's directory itself was deleted or
// moved away: inotify then drops the directory's watch, and without a new
// one no later change to the file would be seen (rm -rf dir; mkdir dir).
func (f *fileWatch) gone(ev fsnotify.Event) bool {
	return ev.Name == f.dir && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0
}

// pathDirEvent reports whether ev creates, removes or moves a directory
// on the file's symlink path (one holding a link met resolving it, or the
// resolved file) or one of its ancestors, outside the file's own
// directory: inotify drops a deleted directory's watch, so the next follow
// must watch the one made in its place (rm -rf relA; mkdir relA behind a
// "current" link, or rm -rf cfg; mkdir cfg; ln -s relB cfg/current for the
// directory holding the link), and the file may be back. A removed one is
// forgotten (extra), so follow watches it again.
func (f *fileWatch) pathDirEvent(ev fsnotify.Event) bool {
	if f.target == "" || ev.Op&(fsnotify.Create|fsnotify.Remove|fsnotify.Rename) == 0 {
		return false
	}
	on := false
	for _, d := range f.pathDirs() {
		if ev.Name == d || strings.HasPrefix(d, ev.Name+string(filepath.Separator)) {
			on = true
			break
		}
	}
	if !on {
		return false
	}
	if ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 && f.extra[ev.Name] {
		delete(f.extra, ev.Name)
	}
	return true
}

// pathDirs is the directories holding the links met resolving the file and
// the resolved file, as last resolved.
func (f *fileWatch) pathDirs() []string {
	dirs := []string{filepath.Dir(f.target)}
	for l := range f.links {
		dirs = append(dirs, filepath.Dir(l))
	}
	return dirs
}

// onPath reports whether name is the file's directory or one of its
// ancestors: while the directory is gone, only those can bring it back.
func (f *fileWatch) onPath(name string) bool {
	return name == f.dir || strings.HasPrefix(f.dir, strings.TrimSuffix(name, string(filepath.Separator))+string(filepath.Separator))
}

// regain watches the file's directory again and reports whether it could.
// While the directory is missing it watches the nearest ancestor that
// exists instead, whose events call regain again as the path is rebuilt.
func (f *fileWatch) regain() bool {
	if !f.lost {
		f.log.Warn().Str("file", f.path).Str("dir", f.dir).Msg("config: the watched file's directory is gone; watching for it to come back")
	}
	f.lost = true
	// Each pass watches one level deeper: a level made between finding the
	// nearest ancestor and watching it (mkdir -p) sends that watch no event.
	prev := ""
	for {
		d := f.dir
		for f.w.Add(d) != nil {
			up := filepath.Dir(d)
			if up == d {
				f.setAnchor("")
				return false // nothing on the way is watchable: the poll goes on
			}
			d = up
		}
		if d == f.dir {
			f.setAnchor("")
			f.lost = false
			f.log.Info().Str("file", f.path).Str("dir", f.dir).Msg("config: the watched file's directory is back; watching it again")
			return true
		}
		f.setAnchor(d)
		if d == prev {
			return false // the level below exists but cannot be watched: the poll goes on
		}
		prev = d
		rest, err := filepath.Rel(d, f.dir)
		if err != nil {
			return false
		}
		next, _, _ := strings.Cut(rest, string(filepath.Separator))
		if _, err := os.Lstat(filepath.Join(d, next)); err != nil {
			return false // the anchor's events will tell when it appears
		}
	}
}

// setAnchor makes d (or nothing, "") the ancestor watched for the lost
// directory, dropping the previous one unless follow watches it too.
func (f *fileWatch) setAnchor(d string) {
	if f.anchor != "" && f.anchor != d && f.anchor != f.dir && !f.extra[f.anchor] {
		_ = f.w.Remove(f.anchor) // already gone with its directory is fine
	}
	f.anchor = d
}

// follow resolves the file's symlinks and watches the directories holding
// them and the target, so that re-pointing any link on the way is seen,
// not only the file's own directory changing. It reports whether it
// watched a directory it did not watch before while the file cannot be
// resolved: what was made there before sent no event.
func (f *fileWatch) follow() (again bool) {
	links, target, ok := resolve(f.path)
	f.unresolved = !ok
	if !ok {
		// Gone for now. If a directory on the way went with it (rm -rf
		// relA, or the directory holding a link), nothing may watch where
		// it comes back: the nearest ancestor of each that exists is
		// watched, whose events (pathDirEvent) bring follow back.
		return f.watchPathAncestors()
	}
	f.target, f.links = target, map[string]bool{}
	want := map[string]bool{}
	for _, l := range links {
		f.links[l] = true
		want[filepath.Dir(l)] = true
	}
	want[filepath.Dir(target)] = true
	// The file's own directory is always watched. Kubernetes' ..2026_xx
	// directory inside it is watched too: the kubelet replaces it, but a
	// write through the link (vim, cat >, the admin editor) lands in it,
	// and went unseen until the next swap.
	delete(want, f.dir)
	for d := range f.extra {
		if !want[d] {
			_ = f.w.Remove(d) // already gone with its directory is fine
			delete(f.extra, d)
		}
	}
	for d := range want {
		// Added again even if watched: a directory deleted and made again
		// between two follows left a dead watch behind (Add is idempotent).
		if err := f.w.Add(d); err != nil {
			f.log.Warn().Err(err).Str("dir", d).Msg("config: cannot watch a directory on the rules file's symlink path")
			continue
		}
		f.extra[d] = true
	}
	return false
}

// watchPathAncestors watches the nearest existing ancestor of each
// directory the file was last resolved through (pathDirs), and reports
// whether one of them was not watched before.
func (f *fileWatch) watchPathAncestors() (added bool) {
	if f.target == "" {
		return false
	}
	for _, d := range f.pathDirs() {
		for {
			if _, err := os.Stat(d); err == nil {
				break
			}
			up := filepath.Dir(d)
			if up == d {
				break
			}
			d = up
		}
		if d == f.dir || f.extra[d] {
			continue
		}
		if err := f.w.Add(d); err != nil {
			f.log.Warn().Err(err).Str("dir", d).Msg("config: cannot watch a directory on the rules file's symlink path")
			continue
		}
		f.extra[d], added = true, true
	}
	return added
}

// resolve follows every symlink in path, component by component, and
// returns each link as met (absolute, unresolved) and the final file.
func resolve(path string) (links []string, target string, ok bool) {
	p := filepath.Clean(path)
	for hops := 0; hops < 64; {
		restart := false
		for i := 1; i <= len(p); i++ {
			if i < len(p) && p[i] != filepath.Separator {
				continue
			}
			prefix := p[:i]
			fi, err := os.Lstat(prefix)
			if err != nil {
				return nil, "", false
			}
			if fi.Mode()&os.ModeSymlink == 0 {
				continue
			}
			to, err := os.Readlink(prefix)
			if err != nil {
				return nil, "", false
			}
			if !filepath.IsAbs(to) {
				to = filepath.Join(filepath.Dir(prefix), to)
			}
			links = append(links, prefix)
			p = filepath.Clean(to + p[i:])
			hops++
			restart = true
			break
		}
		if !restart {
			return links, p, true
		}
	}
	return nil, "", false // a loop
}

// fileHash is the file's state: its content's SHA-256, or why it has none
// (missing, unreadable, not a regular file, too large), read as a reload
// reads it (ReadState).
func fileHash(path string) string {
	_, st, _ := ReadState(path)
	return st
}
