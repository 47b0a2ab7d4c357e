package limiter_test

import (
	"fmt"
	"slices"
	"testing"

	"sluice/internal/passcheck"
	"sluice/limiter"
	"sluice/limiter/window"
)

// TestPrioritizedProperty drives a qps reject rule with prioritized calls
// (one plain call in four), on synthetic time, swept over counts (up to
// the grouped windows above window.MaxSlots), start phases, overloads and
// occupy timeouts; every fifth waiter leaves halfway through its wait. It
// asserts, with each call's pass at the moment it goes upstream (enter +
// Wait):
//   - (a) no real interval of statIntervalMs holds more than count passes,
//     reserved passes included once they pass;
//   - (b) every prioritized call that gets a slot passes within its
//     timeout;
//   - (c) a call is refused only when no moment within its timeout (a plain
//     call: now) has room, as a model of every pass judges; that model
//     leaves out the waiters that left, so (d) their slots are taken by
//     the calls after them. Above MaxSlots a window counts in groups and may
//     refuse a little more (conservative): (c) is checked up to MaxSlots.
func TestPrioritizedProperty(t *testing.T) {
	for _, count := range []float64{1, 2, 3, 7, 100, 1000, 2000} {
		for _, over := range []float64{1.5, 3, 10} {
			if count >= 1000 && over > 3 || count > prioMaxCount {
				continue
			}
			t.Run(fmt.Sprintf("count=%g/over=%gx", count, over), func(t *testing.T) {
				t.Parallel()
				phases := []int64{0, 500*ms + 13}
				if count < 1000 {
					phases = nil
					for ph := int64(0); ph < sec; ph += 3 * sweepStep {
						phases = append(phases, ph)
					}
				}
				waits := []int64{100 * ms, 500 * ms, sec, 1500 * ms}
				if count >= 1000 {
					// The costliest case (30 s of CI alone with two waits):
					// the wait longer than an interval, where a call's slot
					// may lie in the next one.
					waits = []int64{1500 * ms}
				}
				for _, ph := range phases {
					for _, wait := range waits {
						checkPrioritized(t, count, over, wait, t0-t0%sec+ph)
					}
				}
			})
		}
	}
}

// passModel is every pass, for judging the limiter: fits says whether one
// more at at leaves every interval [s, s+iv) containing it with at most
// limit. The most an interval containing at holds is with s at a pass or
// at at, and the earliest moment with room is now, a pass's time, or a
// pass's time + iv (when it leaves).
type passModel struct {
	iv, limit int64
	at        []int64 // sorted
}

func (m *passModel) fits(at int64) bool {
	a, _ := slices.BinarySearch(m.at, at)
	b, _ := slices.BinarySearch(m.at, at+m.iv)
	if int64(b-a) >= m.limit {
		return false
	}
	// The intervals from each pass in (at-iv, at], with the end of the
	// interval (j) moving only forward: linear in the passes of one
	// interval, and allocating nothing, as the sweeps call this millions
	// of times. Of equal passes the first one's interval holds the most,
	// and it is the one looked at first.
	i, _ := slices.BinarySearch(m.at, at-m.iv+1)
	for j := i; i < len(m.at) && m.at[i] <= at; i++ {
		for j < len(m.at) && m.at[j] < m.at[i]+m.iv {
			j++
		}
		if int64(j-i) >= m.limit {
			return false
		}
	}
	return true
}

func (m *passModel) roomWithin(now, until int64) bool {
	if m.fits(now) {
		return true
	}
	lo, _ := slices.BinarySearch(m.at, now-m.iv)
	for _, p := range m.at[lo:] {
		for _, c := range []int64{p, p + m.iv} {
			if c > now && c <= until && m.fits(c) {
				return true
			}
		}
	}
	return false
}

func (m *passModel) add(at int64) {
	i, _ := slices.BinarySearch(m.at, at)
	m.at = slices.Insert(m.at, i, at)
}

func (m *passModel) remove(at int64) {
	if i, ok := slices.BinarySearch(m.at, at); ok {
		m.at = slices.Delete(m.at, i, i+1)
	}
}

// waiter is a prioritized call that leaves while it waits: at leave it
// cancels its tokens, one per checker, whose passes were reserved at at.
type waiter struct {
	leave, at int64
	toks      []limiter.Token
}

// waiters are the calls that will leave, by when they leave.
type waiters []waiter

func (ws *waiters) add(w waiter) {
	k, _ := slices.BinarySearchFunc(*ws, w.leave, func(x waiter, l int64) int { return int(x.leave - l) })
	*ws = slices.Insert(*ws, k, w)
}

// leaveBy ends the waits of the calls that leave by now, and removes
// their passes from the models.
func (ws *waiters) leaveBy(now int64, models ...*passModel) {
	for len(*ws) > 0 && (*ws)[0].leave <= now {
		w := (*ws)[0]
		*ws = (*ws)[1:]
		for i := range w.toks {
			w.toks[i].Cancel(w.leave, limiter.ReasonNone)
		}
		for _, m := range models {
			m.remove(w.at)
		}
	}
}

func checkPrioritized(t *testing.T, count, over float64, maxWait, start int64) {
	t.Helper()
	c := compile(t, qps("r", count)).Checker("r", "default")
	m := &passModel{iv: sec, limit: int64(count)}
	exact := count <= window.MaxSlots
	step := float64(sec) / (count * over)
	end := start + 4*sec
	var leaving waiters
	var waits, refusals int
	for i := int64(0); ; i++ {
		now := start + int64(float64(i)*step+0.999999)
		if now >= end {
			break
		}
		leaving.leaveBy(now, m)
		plain := i%4 == 3
		var tok limiter.Token
		var v limiter.Verdict
		if plain {
			tok, v = c.Enter(now, "", 1)
		} else {
			tok, v = c.EnterPrioritized(now, "", 1, maxWait)
		}
		if v.Blocked {
			refusals++
			until := now + min(maxWait, sec) // a window reserves at most one interval ahead
			if plain {
				until = now
			}
			if exact && (refusals%20 == 0 || count < 100) && m.roomWithin(now, until) {
				t.Fatalf("count %g, %vx, wait %dms, phase %dms: call %d at +%dms refused with room within its timeout",
					count, over, maxWait/ms, (start%sec)/ms, i, (now-start)/ms)
			}
			continue
		}
		wait := int64(v.Wait)
		if wait > min(maxWait, sec) || plain && wait != 0 || v.Prioritized != (wait > 0) {
			t.Fatalf("call %d: wait %dns (prioritized %v), timeout %dms", i, wait, v.Prioritized, maxWait/ms)
		}
		at := now + wait
		m.add(at)
		if wait > 0 {
			waits++
			if waits%5 == 0 {
				leaving.add(waiter{leave: now + wait/2, at: at, toks: []limiter.Token{tok}})
				continue
			}
		}
		tok.Exit(at, false)
	}
	if got := passcheck.MostInInterval(m.at, sec); got > int(count) {
		t.Fatalf("count %g, %vx, wait %dms, phase %dms: a real interval held %d passes", count, over, maxWait/ms, (start%sec)/ms, got)
	}
	if waits == 0 && maxWait >= sec {
		t.Fatalf("count %g, %vx: no call waited", count, over)
	}
}
