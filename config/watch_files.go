package config

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// WatchFiles is Watch over several files (a certificate, its key, a CA):
// onChange runs whenever the content of any of them changes, possibly
// concurrently for two different files, until ctx is done. Each file is
// watched exactly as Watch watches rules.yaml (its directory, symlink swaps,
// renames into place). ready, if not nil, is closed once every watch is in
// place, so that a caller can look at the files once more and miss nothing
// written in between. If any watch cannot be set up, the others are stopped
// and its error is returned.
func WatchFiles(ctx context.Context, paths []string, debounce time.Duration, log zerolog.Logger, onChange func(), ready chan<- struct{}) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	started := make(chan struct{}, len(paths))
	for _, p := range paths {
		r := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := watch(ctx, p, debounce, log, onChange, r); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				cancel()
			}
		}()
		go func() {
			select {
			case <-r:
				started <- struct{}{}
			case <-ctx.Done():
			}
		}()
	}
	go func() {
		for range paths {
			select {
			case <-started:
			case <-ctx.Done():
				return
			}
		}
		if ready != nil {
			close(ready)
		}
	}()
	wg.Wait()
	return first
}
