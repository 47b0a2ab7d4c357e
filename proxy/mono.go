package proxy

import "time"

// monoEpoch is the origin of the instants the package keeps as numbers
// (in atomics, in ring.Coarse): time.Time's monotonic reading cannot be
// stored as one, and UnixNano is the wall clock, which NTP or a resumed VM
// may step. A step back kept a peer's premature resets of an hour before
// counting in a 10 s window; a step forward closed a WebSocket idle for a
// second, and set a body's read deadline in the past. Set once, at init,
// and never written.
var monoEpoch = time.Now()

// monoNow is the time since monoEpoch on the monotonic clock, in ns.
func monoNow() int64 { return int64(time.Since(monoEpoch)) }

// monoOf is t as monoNow counts it: t must carry a monotonic reading
// (time.Now's), or the wall clock is read after all.
func monoOf(t time.Time) int64 { return int64(t.Sub(monoEpoch)) }

// monoTime is the instant ns after monoEpoch, with its monotonic reading:
// a deadline set from it is not moved by a step of the wall clock.
func monoTime(ns int64) time.Time { return monoEpoch.Add(time.Duration(ns)) }
