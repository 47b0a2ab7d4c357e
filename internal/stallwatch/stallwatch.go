// Package stallwatch tells a machine too busy to run a test apart from a
// slow program: a goroutine that wakes every 5 ms notes how late it ran,
// which is how long the test's process, gateway and clients alike, went
// unrun.
package stallwatch

import (
	"sync/atomic"
	"testing"
	"time"
)

// Watcher measures the longest stall since its last Take.
type Watcher struct{ worst atomic.Int64 }

// every is how often the watcher wakes.
const every = 5 * time.Millisecond

// Start starts a Watcher, stopped when t ends.
func Start(t testing.TB) *Watcher {
	w := &Watcher{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				now := time.Now()
				if late := int64(now.Sub(last) - every); late > w.worst.Load() {
					w.worst.Store(late)
				}
				last = now
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return w
}

// Take returns the longest stall since the last Take (or Start).
func (w *Watcher) Take() time.Duration { return time.Duration(w.worst.Swap(0)) }
