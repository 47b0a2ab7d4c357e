package proxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: upstream
// calls, throttle waits and timers must all end with their request.
//
// Ignored, by design rather than a leak: each fasthttp HostClient's
// idle-connection cleaner, which exits once its pooled connections idle out.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
	)
}
