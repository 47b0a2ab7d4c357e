package config

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (the
// watcher starts fsnotify goroutines that must end with its context).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
