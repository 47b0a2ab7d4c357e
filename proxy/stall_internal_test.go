package proxy

import (
	"testing"
	"time"
)

// TestStalledByClient: when the route timeout ends a streamed upload, the
// client is at fault exactly when its body had not all arrived and the
// gateway was waiting on it: a Read waiting clientWait or more, or such a
// Read that returned within clientStall (its piece then went on to the
// upstream). Reads that return at once (a client ahead of a busy gateway),
// a forwarder stuck writing to an upstream that stopped reading, a body
// read to its end, or one never read are not the client's.
func TestStalledByClient(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name      string
		read, eof bool
		waiting   time.Duration // the Read in progress began this long ago (0: none)
		lastWait  time.Duration // the last Read took this long
		sinceRead time.Duration // and returned this long ago
		want      bool
	}{
		{"a Read has waited on the client", true, false, clientWait, 0, time.Second, true},
		{"a Read has just begun", true, false, clientWait / 2, 0, time.Millisecond, false},
		{"a waiting Read just returned", true, false, 0, 10 * time.Millisecond, clientStall / 2, true},
		{"Reads return at once: the client is ahead", true, false, 0, clientWait / 2, 0, false},
		{"stuck writing to the upstream", true, false, 0, 10 * time.Millisecond, clientStall * 2, false},
		{"the whole body arrived", true, true, time.Second, time.Second, 0, false},
		{"never read", false, false, 0, 0, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &clientBody{}
			b.read.Store(tc.read)
			b.eof.Store(tc.eof)
			if tc.waiting > 0 {
				b.waitFrom.Store(now.Add(-tc.waiting).UnixNano())
			}
			b.lastWait.Store(int64(tc.lastWait))
			b.readAt.Store(now.Add(-tc.sinceRead).UnixNano())
			if got := b.stalledByClient(now); got != tc.want || b.failed.Load() != tc.want || b.timedOut.Load() != tc.want {
				t.Errorf("stalledByClient = %v (failed %v, timedOut %v), want %v", got, b.failed.Load(), b.timedOut.Load(), tc.want)
			}
		})
	}
}
