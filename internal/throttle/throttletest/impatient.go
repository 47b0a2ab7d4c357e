// Package throttletest holds the properties every throttle queue user must
// keep, driven through its own API (flow rules, param rules).
package throttletest

import (
	"slices"
	"testing"
	"time"
)

// Enter offers one call at now to a throttle rule of count 10 a second and
// maxQueueingTimeMs 5000. When it passes, the call must later be ended with
// end: forwarded at its slot, or given up (the client left).
type Enter func(now int64) (wait time.Duration, end func(now int64, forwarded bool), passed bool)

// ImpatientClientsStillForwarded offers 40 calls a second for 20 s whose
// clients give up after 1 s in the queue (in arrival order, so each leaver
// has later calls queued behind it). The slots they give back must be taken
// by new calls, so that the queue keeps forwarding count a second, never two
// calls closer than the spacing. A queue that loses those slots fills with
// empty ones 5 s away and forwards nothing after the first second.
func ImpatientClientsStillForwarded(t *testing.T, t0 int64, enter Enter) {
	t.Helper()
	const sec = int64(time.Second)
	type queued struct {
		end       func(int64, bool)
		at, leave int64
	}
	var waiting []queued
	var forwarded []int64
	const secs, rate = 20, 40
	settle := func(now int64) {
		keep := waiting[:0]
		for _, w := range waiting {
			switch {
			case w.at <= now && w.at <= w.leave:
				forwarded = append(forwarded, w.at)
				w.end(w.at, true)
			case w.leave <= now:
				w.end(w.leave, false)
			default:
				keep = append(keep, w)
			}
		}
		waiting = keep
	}
	for i := range int64(secs * rate) {
		now := t0 + i*sec/rate
		settle(now)
		if wait, end, ok := enter(now); ok {
			waiting = append(waiting, queued{end, now + int64(wait), now + sec})
		}
	}
	settle(t0 + (secs+10)*sec)
	slices.Sort(forwarded)
	perSec := make([]int, secs+1)
	for i, f := range forwarded {
		perSec[(f-t0)/sec]++
		if i > 0 && f-forwarded[i-1] < sec/10 {
			t.Fatalf("forwarded %v after the previous call, spacing is 100ms", time.Duration(f-forwarded[i-1]))
		}
	}
	t.Logf("forwarded per second: %v", perSec)
	for s := 1; s < secs; s++ {
		if perSec[s] < 9 {
			t.Fatalf("second %d forwarded %d, want about 10 (per second %v)", s, perSec[s], perSec)
		}
	}
}
