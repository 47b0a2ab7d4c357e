package proxy

import (
	"testing"
	"time"
)

// TestStalledByClient: when the route timeout ends a streamed upload, the
// upstream is at fault only when it had the whole body, or when the
// gateway was stuck writing to it (no Read of the client's body for
// clientStall); while a Read was in progress, or one returned within
// clientStall, the body was still on its way from the client: 408.
func TestStalledByClient(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name               string
		read, eof, reading bool
		sinceRead          time.Duration // the last Read returned this long ago
		want               bool
	}{
		{"a Read waits on the client", true, false, true, time.Second, true},
		{"a Read just returned (pieces every 1 ms)", true, false, false, time.Millisecond, true},
		{"a Read returned within clientStall", true, false, false, clientStall - time.Millisecond, true},
		{"stuck writing to the upstream", true, false, false, clientStall + time.Millisecond, false},
		{"the whole body arrived", true, true, false, 0, false},
		{"never read", false, false, false, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &clientBody{}
			b.read.Store(tc.read)
			b.eof.Store(tc.eof)
			b.reading.Store(tc.reading)
			b.readAt.Store(monoOf(now.Add(-tc.sinceRead)))
			if got := b.stalledByClient(now); got != tc.want || b.failed.Load() != tc.want || b.timedOut.Load() != tc.want {
				t.Errorf("stalledByClient = %v (failed %v, timedOut %v), want %v", got, b.failed.Load(), b.timedOut.Load(), tc.want)
			}
		})
	}
}
