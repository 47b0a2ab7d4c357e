package admin

import (
	"os"
	"testing"

	"sluice/internal/skipped"
)

// TestMain prints one line of the tests skipped for lack of chromium or
// Redis, even without -v.
func TestMain(m *testing.M) { os.Exit(skipped.Main(m).Run()) }
