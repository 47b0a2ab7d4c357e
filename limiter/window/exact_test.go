package window_test

import (
	"fmt"
	"math"
	"testing"

	"sluice/limiter/window"
)

const (
	ms  = int64(1e6)
	sec = int64(1e9)
	// t0 is an arbitrary instant on no grid.
	t0 = int64(7_000_000_000_000) + 123_456_789
)

// model is the greedy exact window by brute force: every pass kept, a call of
// n tokens passes when the tokens passed in (now-interval, now] plus n are
// at most limit. Greedy passing is the most any limiter can pass while no
// real interval holds more than limit.
type model struct {
	interval, limit int64
	times, ns       []int64
	from            int // first pass still in the window
	live            int64
}

func (m *model) try(now, n int64) bool {
	for m.from < len(m.times) && m.times[m.from] <= now-m.interval {
		m.live -= m.ns[m.from]
		m.from++
	}
	if m.live+n > m.limit {
		return false
	}
	m.times, m.ns = append(m.times, now), append(m.ns, n)
	m.live += n
	return true
}

// maxTokens is the most tokens any real interval [s, s+length) holds.
func maxTokens(times, ns []int64, length int64) int64 {
	var best, sum int64
	j := 0
	for i := range times {
		for j < len(times) && times[j] < times[i]+length {
			sum += ns[j]
			j++
		}
		best = max(best, sum)
		sum -= ns[i]
	}
	return best
}

func TestExactSmallCases(t *testing.T) {
	w := window.NewExact(sec, 3)
	var r window.Result
	steps := []struct {
		at   int64
		n    int64
		pass bool
	}{
		{t0, 1, true},
		{t0 + 100*ms, 1, true},
		{t0 + 200*ms, 1, true},
		{t0 + 300*ms, 1, false},
		{t0 + sec - 1, 1, false}, // the first pass still counts 1 ns before it leaves
		{t0 + sec, 1, true},      // and leaves exactly one interval after it
		{t0 + sec, 1, false},
		{t0 + sec + 200*ms, 2, true}, // the 2nd and 3rd left
		{t0 + 10*sec, 4, false},      // more than the limit never passes
		{t0 + 10*sec, 3, true},
	}
	for i, s := range steps {
		if got := w.TryAdd(s.at, s.n, 3, true, &r); got != s.pass {
			t.Fatalf("step %d: pass %v, want %v (%+v)", i, got, s.pass, r)
		}
	}
}

// Reset is when the oldest counted pass leaves; Retry when the refused call
// would pass: a client that waits Retry and calls again is passed.
func TestExactResetAndRetry(t *testing.T) {
	for _, n := range []int64{1, 2, 3} {
		w := window.NewExact(sec, 3)
		var r window.Result
		for _, at := range []int64{t0, t0 + 100*ms, t0 + 200*ms} {
			w.TryAdd(at, 1, 3, true, &r)
		}
		if r.Reset != 800*ms {
			t.Errorf("Reset %v, want 800ms", r.Reset)
		}
		now := t0 + 300*ms
		if w.TryAdd(now, n, 3, true, &r) {
			t.Fatalf("n %d passed a full window", n)
		}
		want := int64(n-1)*100*ms + 700*ms
		if r.Retry != want || r.Reset != 700*ms {
			t.Errorf("n %d: Retry %v Reset %v, want %v and 700ms", n, r.Retry, r.Reset, want)
		}
		if w.TryAdd(now+r.Retry-1, n, 3, false, &r) {
			t.Errorf("n %d: passed 1 ns before Retry", n)
		}
		if !w.TryAdd(now+want, n, 3, false, &r) {
			t.Errorf("n %d: refused at Retry", n)
		}
	}
}

// A call taken back (cancelled) frees its tokens; one that already left the
// window takes nothing back.
func TestExactSub(t *testing.T) {
	w := window.NewExact(sec, 2)
	var r window.Result
	w.TryAdd(t0, 1, 2, false, &r)
	w.TryAdd(t0+500*ms, 1, 2, false, &r)
	w.Sub(t0+600*ms, t0, 1) // the older call is cancelled
	if got := w.Total(t0 + 600*ms); got != 1 {
		t.Fatalf("total %d after Sub, want 1", got)
	}
	// the one that stays is the call at +500ms: it still counts at +1.4 s
	if !w.TryAdd(t0+700*ms, 1, 2, false, &r) || w.TryAdd(t0+1400*ms, 1, 2, false, &r) {
		t.Fatalf("after Sub the window must hold the +500ms pass until +1.5 s")
	}
	w.Sub(t0+1200*ms, t0+100*ms, 1) // a pass that would have left by now
	if got := w.Total(t0 + 1200*ms); got != 2 {
		t.Fatalf("total %d, want 2 (+500ms and +700ms)", got)
	}
}

// A caller whose now is behind the newest pass is stamped at the newest
// time: it never frees a slot early.
func TestExactClockBehind(t *testing.T) {
	w := window.NewExact(sec, 2)
	var r window.Result
	w.TryAdd(t0+900*ms, 1, 2, false, &r)
	w.TryAdd(t0, 1, 2, false, &r) // stamped +900ms
	if w.TryAdd(t0+1800*ms, 1, 2, false, &r) {
		t.Fatal("a stale call's pass left the window before the newer one")
	}
	if !w.TryAdd(t0+1900*ms, 2, 2, false, &r) {
		t.Fatal("both passes should have left at +1.9 s")
	}
}

// Memory stays bounded at any count, and grows with the passes held.
func TestExactBytesBounded(t *testing.T) {
	for _, count := range []float64{10, 1000, 100000, 1e9} {
		w := window.NewExact(sec, count)
		var r window.Result
		empty := w.Bytes()
		for i := range int64(min(count, 2e6)) {
			w.TryAdd(t0+i, 1, count, false, &r)
		}
		full := w.Bytes()
		if full > 8*2*(window.MaxSlots+2)*2+200 {
			t.Errorf("count %g: %d bytes when full", count, full)
		}
		t.Logf("count %g: %d bytes empty, %d full", count, empty, full)
	}
}

// The window's promise as a property, over counts, intervals, token counts,
// overloads and start phases (where calls fall on the interval grid):
//   - calls exactly interval/count apart (per token) all pass;
//   - under overload it passes exactly what the greedy exact model passes
//     (the most any limiter can pass under the bound) up to MaxSlots tokens,
//     within one group below it above;
//   - no real interval holds more than count.
func TestExactProperty(t *testing.T) {
	counts := []float64{1, 2, 3, 5, 10, 100, 1000, 100000}
	intervals := []int64{100, 1000, 60000}
	phases := sweepPhases()
	for _, count := range counts {
		for _, ivMs := range intervals {
			for _, n := range []int64{1, 3} {
				if float64(n) > count {
					continue
				}
				iv := ivMs * ms
				t.Run(fmt.Sprintf("count=%g/iv=%dms/n=%d", count, ivMs, n), func(t *testing.T) {
					t.Parallel()
					for _, ph := range phases {
						start := t0 - t0%sec + ph
						paced(t, count, iv, n, start)
						for _, over := range []float64{1.05, 1.5, 3, 10} {
							overloaded(t, count, iv, n, over, start)
						}
					}
				})
			}
		}
	}
}

// intervalsFor is how many intervals a case runs: fewer for huge counts.
func intervalsFor(count float64) int64 {
	if count >= 100000 {
		return 2
	}
	return 4
}

// paced offers calls of n tokens, floor(count/n) an interval, call i at
// ceil(i*iv/per) after start: no real interval holds more than count tokens
// of them, so all must pass.
func paced(t *testing.T, count float64, iv, n, start int64) {
	w := window.NewExact(iv, count)
	var r window.Result
	per := int64(count) / n
	calls := intervalsFor(count) * per
	refused := 0
	for i := range calls {
		at := start + ceilDiv(i*iv, per)
		if !w.TryAdd(at, n, count, false, &r) {
			refused++
		}
	}
	if refused > 0 && count <= window.MaxSlots {
		t.Fatalf("paced at the limit from %d: %d of %d refused", start%sec, refused, calls)
	}
	// above MaxSlots a group is counted until its last token leaves
	if refused > 0 && float64(refused) > float64(calls)*groupShare(count)+1 {
		t.Fatalf("paced at the limit from %d: %d of %d refused, more than one group an interval", start%sec, refused, calls)
	}
}

func groupShare(count float64) float64 {
	g := math.Ceil(count / window.MaxSlots)
	return g / count
}

func overloaded(t *testing.T, count float64, iv, n int64, over float64, start int64) {
	w := window.NewExact(iv, count)
	// No real interval holds more than count tokens, so the passes fit in
	// these: made once, not grown call by call (a sweep at count 100000
	// spent most of its time in append).
	most := (intervalsFor(count) + 1) * int64(count) / n
	m := &model{interval: iv, limit: int64(count), times: make([]int64, 0, most), ns: make([]int64, 0, most)}
	var r window.Result
	perCall := float64(iv) * float64(n) / (count * over) // ns between calls
	end := start + intervalsFor(count)*iv
	times, ns := make([]int64, 0, most), make([]int64, 0, most)
	modelPassed := 0
	for i := int64(0); ; i++ {
		at := start + int64(math.Ceil(float64(i)*perCall))
		if at >= end {
			break
		}
		if w.TryAdd(at, n, count, false, &r) {
			times, ns = append(times, at), append(ns, n)
		}
		if m.try(at, n) {
			modelPassed++
		}
	}
	if got := maxTokens(times, ns, iv); got > int64(count) {
		t.Fatalf("%vx from %d: a real interval held %d > %v", over, start%sec, got, count)
	}
	if count <= window.MaxSlots {
		if len(times) != modelPassed {
			t.Fatalf("%vx from %d: passed %d calls, the exact model %d", over, start%sec, len(times), modelPassed)
		}
	} else if lo := float64(modelPassed) * (1 - 2*groupShare(count)); float64(len(times)) < lo {
		t.Fatalf("%vx from %d: passed %d calls, the exact model %d", over, start%sec, len(times), modelPassed)
	}
	// where the calls of one interval are a whole number, each interval
	// after the first passes exactly count (tokens)
	if perIv := float64(iv) / perCall; perIv == math.Trunc(perIv) && count <= window.MaxSlots {
		for k := int64(1); k < intervalsFor(count); k++ {
			var got int64
			for i, p := range times {
				if p >= start+k*iv && p < start+(k+1)*iv {
					got += ns[i]
				}
			}
			if want := int64(count) / n * n; got != want {
				t.Fatalf("%vx from %d: interval %d passed %d tokens, want %d", over, start%sec, k, got, want)
			}
		}
	}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
