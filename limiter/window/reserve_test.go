package window_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"sluice/limiter/window"
)

// pts is the brute-force model of a window with reservations: every pass
// and reserved pass kept with its time, for good.
type pts struct {
	interval, limit int64
	at, n           []int64
}

// fits reports whether n tokens at t leave every interval [s, s+interval)
// containing t with at most limit tokens, trying every s.
func (m *pts) fits(t, n int64) bool {
	for s := t - m.interval + 1; s <= t; s++ {
		sum := n
		for i, a := range m.at {
			if a >= s && a < s+m.interval {
				sum += m.n[i]
			}
		}
		if sum > m.limit {
			return false
		}
	}
	return true
}

// earliest is the first t in [from, until] at which n tokens fit.
func (m *pts) earliest(from, until, n int64) (int64, bool) {
	for t := from; t <= until; t++ {
		if m.fits(t, n) {
			return t, true
		}
	}
	return 0, false
}

func (m *pts) add(t, n int64) { m.at, m.n = append(m.at, t), append(m.n, n) }

func (m *pts) drop(t, n int64) {
	for i := range m.at {
		if m.at[i] == t && m.n[i] == n {
			m.at = append(m.at[:i], m.at[i+1:]...)
			m.n = append(m.n[:i], m.n[i+1:]...)
			return
		}
	}
}

// worst is the most tokens any interval holds.
func (m *pts) worst() int64 {
	var best int64
	for _, s := range m.at {
		var sum int64
		for i, a := range m.at {
			if a >= s && a < s+m.interval {
				sum += m.n[i]
			}
		}
		best = max(best, sum)
	}
	return best
}

// TestReserveMatchesModel drives a window with plain passes (TryAdd),
// prioritized ones (EarliestRoom then Reserve, for up to maxWait) and
// waiters leaving (Unreserve), on a small time scale where the model can
// try every instant, and checks each answer against the model:
//   - TryAdd passes exactly when n tokens fit at now;
//   - EarliestRoom is the first instant in [now, now+maxWait] at which they
//     fit (so a call is refused only when no instant has room), and
//     Reserve there succeeds;
//   - no interval ever holds more than limit, reservations included;
//   - a waiter's slot given back is taken by the next call that fits it.
func TestReserveMatchesModel(t *testing.T) {
	for _, limit := range []int64{1, 2, 3, 7} {
		for _, iv := range []int64{10, 17} {
			for seed := range uint64(20) {
				t.Run(fmt.Sprintf("limit=%d/iv=%d/seed=%d", limit, iv, seed), func(t *testing.T) {
					checkReserveModel(t, limit, iv, seed)
				})
			}
		}
	}
}

func checkReserveModel(t *testing.T, limit, iv int64, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(limit*100+iv)))
	w := window.NewExact(iv, float64(limit))
	m := &pts{interval: iv, limit: limit}
	type held struct{ at, n int64 }
	var waiting []held
	now := int64(1000)
	var r window.Result
	for step := range 400 {
		now += rng.Int64N(3)
		n := int64(1)
		if limit > 2 && rng.IntN(4) == 0 {
			n = 2
		}
		switch op := rng.IntN(10); {
		case op < 4: // a plain call
			want := m.fits(now, n)
			if got := w.TryAdd(now, n, float64(limit), false, &r); got != want {
				t.Fatalf("step %d: TryAdd(%d, %d) = %v, model says %v (points %v)", step, now, n, got, want, m.at)
			}
			if want {
				m.add(now, n)
			} else if r.Retry >= 0 {
				if at, ok := m.earliest(now, now+3*iv, n); !ok || at != now+r.Retry {
					t.Fatalf("step %d: Retry %d, model's first room %d (%v)", step, r.Retry, at-now, ok)
				}
			}
		case op < 8: // a prioritized call
			maxWait := rng.Int64N(2 * iv)
			want, wok := m.earliest(now, now+min(maxWait, iv), n) // one interval ahead at most
			at, ok := w.EarliestRoom(now, now, n, float64(limit), now+maxWait)
			if ok != wok || ok && at != want {
				t.Fatalf("step %d: EarliestRoom(%d, n %d, wait %d) = %d %v, model %d %v (points %v)", step, now, n, maxWait, at, ok, want, wok, m.at)
			}
			if !ok {
				continue
			}
			st, ahead, ok := w.Reserve(now, at, n, float64(limit))
			if !ok || st != at || ahead != (at > now) {
				t.Fatalf("step %d: Reserve(%d) = %d ahead %v %v after EarliestRoom found it (now %d)", step, at, st, ahead, ok, now)
			}
			m.add(at, n)
			if at > now {
				waiting = append(waiting, held{at, n})
			}
		default: // a waiter leaves before its time
			for i, h := range waiting {
				if h.at > now {
					w.Unreserve(now, h.at, h.n)
					m.drop(h.at, h.n)
					waiting = append(waiting[:i], waiting[i+1:]...)
					break
				}
			}
		}
		if got := m.worst(); got > limit {
			t.Fatalf("step %d: an interval holds %d > %d (points %v)", step, got, limit, m.at)
		}
	}
}

// A waiter that leaves frees its slot: the next prioritized call is given
// it instead of a later one.
func TestUnreserveFreesTheSlot(t *testing.T) {
	w := window.NewExact(sec, 2)
	var r window.Result
	w.TryAdd(t0, 1, 2, false, &r)
	w.TryAdd(t0+100*ms, 1, 2, false, &r)
	now := t0 + 200*ms
	a, ok := w.EarliestRoom(now, now, 1, 2, now+2*sec)
	if !ok || a != t0+sec {
		t.Fatalf("first waiter: %v %v, want t0+1s", a-t0, ok)
	}
	w.Reserve(now, a, 1, 2)
	b, _ := w.EarliestRoom(now, now, 1, 2, now+2*sec)
	if b != t0+sec+100*ms {
		t.Fatalf("second waiter: t0+%v, want t0+1.1s", time(b-t0))
	}
	if _, ok := w.EarliestRoom(now, now, 1, 2, now+800*ms); ok {
		t.Fatal("room within 800 ms of a full window")
	}
	w.Unreserve(now+50*ms, a, 1)
	if c, _ := w.EarliestRoom(now+50*ms, now+50*ms, 1, 2, now+2*sec); c != t0+sec {
		t.Fatalf("after the first waiter left: t0+%v, want its slot t0+1s", time(c-t0))
	}
	// a plain call cannot take a reserved slot's room early
	w.Reserve(now, t0+sec, 1, 2)
	if w.TryAdd(t0+sec, 1, 2, false, &r) || w.TryAdd(t0+sec+99*ms, 1, 2, false, &r) {
		t.Fatal("a plain call passed beside the reservation in a full interval")
	}
}

type time int64

func (d time) String() string { return fmt.Sprintf("%dms", int64(d)/ms) }
