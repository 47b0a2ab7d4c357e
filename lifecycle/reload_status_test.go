package lifecycle

import (
	"testing"
	"time"
)

// TestStateAnswersDuringAReload: /readyz and /api/rules read the state
// without waiting for a reload in progress. They took the reload's lock,
// so they waited for the whole of one (1.9 s for 30,000 routes), and for
// ever behind a reload that never ended.
func TestStateAnswersDuringAReload(t *testing.T) {
	up := upstream(t)
	path, _ := rulesFile(t, up, "routes: [{path: /a, upstream: app}]\n")
	inst := newStopped(t, path)
	r := inst.reloader
	r.mu.Lock() // a reload in progress
	defer r.mu.Unlock()
	done := make(chan bool, 1)
	go func() { done <- r.state().Ready }()
	select {
	case ready := <-done:
		if !ready {
			t.Error("state during a reload: not ready, with rules in force")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("state waited for the reload in progress")
	}
}
