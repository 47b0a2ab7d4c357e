// Package window holds sluice's time windows: Exact, the sliding window that
// decides qps limits (flow rules, warm-up's check, system.maxQps), and the
// ring arithmetic that the bucketed statistics windows share.
//
// Every method takes the time as an argument (now, in nanoseconds on any
// monotonic origin); nothing here reads a clock.
//
// Layer 2 of docs/architecture.md: it imports no sluice package; limiter and
// limiter/system use it.
package window

import (
	"math"
	"sync"
)

// MaxSlots bounds the slots of an Exact window. Up to MaxSlots tokens a
// window keeps the time of every passed token and is exact; above it, a slot
// stands for a group of ceil(limit/MaxSlots) tokens, stamped with the time of
// its latest token, so a group is counted until its last token leaves: the
// window then passes at most one group (1/MaxSlots of the limit) less than an
// exact one would, and never more.
const MaxSlots = 1024

// Exact is an exact sliding-window counter: a call of n tokens passes at now
// when the tokens passed in (now-interval, now] plus n are at most the limit.
// So no real interval of that length ever holds more than the limit, a caller
// whose calls are at least interval/limit apart is never refused, and a
// steady overload passes exactly the limit per interval.
//
// It is a FIFO ring of slots holding pass times in the order they were
// passed; a slot leaves the window once now >= its time + interval. Times are
// kept non-decreasing (a call whose now is older than the newest slot is
// stamped with the newest time), so a concurrent caller's slightly stale now
// can only make the window count a pass longer, never shorter. Memory grows
// with the passes actually held, up to MaxSlots slots (+2), whatever the
// limit.
//
// Safe for concurrent use: one short mutex guards it (measured faster on two
// cores than the lock-free bucket ring it replaced; see BenchmarkQpsCheck).
// The zero Exact is not usable; build it with NewExact.
type Exact struct {
	mu       sync.Mutex
	interval int64 // ns
	group    int64 // tokens a slot can hold: 1 up to MaxSlots tokens
	maxSlots int   // slots the ring may grow to
	// ring holds the live slots' times from first, n of them, oldest
	// first; cnt (nil when group is 1) their token counts.
	ring  []int64
	cnt   []int64
	first int
	n     int
	total int64 // tokens in the live slots
}

// NewExact builds a window over interval ns able to hold up to capacity
// tokens (the highest limit it will be asked about; a warm-up rule's limit
// varies below its count).
func NewExact(interval int64, capacity float64) *Exact {
	w := &Exact{interval: max(interval, 1), group: 1}
	c := int64(1)
	if capacity >= 1 {
		c = int64(math.Min(capacity, math.MaxInt64/4))
	}
	if c > MaxSlots {
		w.group = (c + MaxSlots - 1) / MaxSlots
	}
	w.maxSlots = int((c+w.group-1)/w.group) + 2
	return w
}

// Interval returns the window's length in ns.
func (w *Exact) Interval() int64 { return w.interval }

// expire drops the slots that left the window by now (mu held).
func (w *Exact) expire(now int64) {
	edge := now - w.interval
	for w.n > 0 && w.ring[w.first] <= edge {
		if w.cnt != nil {
			w.total -= w.cnt[w.first]
			w.cnt[w.first] = 0
		} else {
			w.total--
		}
		w.first++
		if w.first == len(w.ring) {
			w.first = 0
		}
		w.n--
	}
}

// Result is what a check saw, for the RateLimit fields and Retry-After.
type Result struct {
	// Total is the tokens in the window after the call (its own included
	// when it passed).
	Total int64
	// Reset is how long after now the oldest counted token leaves (0: the
	// window is empty).
	Reset int64
	// Retry, for a refused call, is how long after now the same call would
	// pass if nothing else passed meanwhile; -1 if never (n over the limit).
	Retry int64
}

// TryAdd passes n tokens at now if the window then holds at most limit, and
// counts them. res is filled when quota is true or the call is refused.
func (w *Exact) TryAdd(now, n int64, limit float64, quota bool, res *Result) bool {
	lim := int64(math.Floor(limit))
	if limit >= math.MaxInt64/4 {
		lim = math.MaxInt64 / 4
	}
	w.mu.Lock()
	w.expire(now)
	if w.total+n > lim || !w.push(now, n) {
		res.Total = w.total
		res.Reset = w.resetLocked(now)
		res.Retry = w.retryLocked(now, lim-n)
		w.mu.Unlock()
		return false
	}
	if quota {
		res.Total = w.total
		res.Reset = w.resetLocked(now)
	}
	w.mu.Unlock()
	return true
}

// Add counts n tokens at now whatever the limit (a pass decided elsewhere:
// a cluster rule's, which the local fallback must see). Tokens that find no
// slot are dropped (only possible above the window's capacity).
func (w *Exact) Add(now, n int64) {
	w.mu.Lock()
	w.expire(now)
	w.push(now, n)
	w.mu.Unlock()
}

// push records n tokens at now (mu held, expired slots dropped). It fails,
// recording nothing, if the ring cannot hold them.
func (w *Exact) push(now, n int64) bool {
	if w.n > 0 {
		now = max(now, w.ring[w.at(w.n-1)]) // keep times in order
	}
	if w.cnt == nil {
		if w.n+int(n) > w.maxSlots {
			return false
		}
		w.grow(w.n + int(n))
		for range n {
			w.ring[w.at(w.n)] = now
			w.n++
		}
		w.total += n
		return true
	}
	// grouped: fill the newest slot, then open new ones
	need := n
	if w.n > 0 {
		need -= w.group - w.cnt[w.at(w.n-1)]
	}
	if need > 0 && w.n+int((need+w.group-1)/w.group) > w.maxSlots {
		return false
	}
	rest := n
	if w.n > 0 {
		i := w.at(w.n - 1)
		d := min(w.group-w.cnt[i], rest)
		if d > 0 {
			w.cnt[i] += d
			w.ring[i] = now
			rest -= d
		}
	}
	for rest > 0 {
		w.grow(w.n + 1)
		i := w.at(w.n)
		d := min(w.group, rest)
		w.ring[i], w.cnt[i] = now, d
		w.n++
		rest -= d
	}
	w.total += n
	return true
}

func (w *Exact) at(k int) int {
	i := w.first + k
	if i >= len(w.ring) {
		i -= len(w.ring)
	}
	return i
}

// grow makes room for k live slots, doubling the ring (in order) as needed.
func (w *Exact) grow(k int) {
	if k <= len(w.ring) {
		return
	}
	size := max(len(w.ring)*2, 4)
	for size < k {
		size *= 2
	}
	size = min(size, w.maxSlots)
	ring := make([]int64, size)
	var cnt []int64
	if w.group > 1 {
		cnt = make([]int64, size)
	}
	for j := 0; j < w.n; j++ {
		ring[j] = w.ring[w.at(j)]
		if cnt != nil {
			cnt[j] = w.cnt[w.at(j)]
		}
	}
	w.ring, w.cnt, w.first = ring, cnt, 0
}

// Sub takes back n tokens counted at at (a pass later cancelled). It takes
// them from the newest slots stamped at or before at's slot, so the tokens
// that stay are stamped no earlier than their real pass: the window may
// count them longer, never shorter. Tokens that already left are not
// taken back.
func (w *Exact) Sub(now, at, n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire(now)
	if at <= now-w.interval {
		return // left the window already
	}
	// the call's tokens went to the oldest slot stamped at or after at
	k := w.n - 1
	for k > 0 && w.ring[w.at(k-1)] >= at {
		k--
	}
	for n > 0 && k >= 0 && k < w.n {
		i := w.at(k)
		if w.ring[i] < at {
			return // left, or never here
		}
		d := int64(1)
		if w.cnt != nil {
			d = min(w.cnt[i], n)
			w.cnt[i] -= d
		}
		w.total -= d
		n -= d
		if w.cnt == nil || w.cnt[i] == 0 {
			w.remove(k)
		} else {
			k++
		}
	}
}

// remove deletes live slot k, shifting the older ones up by one (mu held).
func (w *Exact) remove(k int) {
	for j := k; j > 0; j-- {
		w.ring[w.at(j)] = w.ring[w.at(j-1)]
		if w.cnt != nil {
			w.cnt[w.at(j)] = w.cnt[w.at(j-1)]
		}
	}
	if w.cnt != nil {
		w.cnt[w.first] = 0
	}
	w.first++
	if w.first == len(w.ring) {
		w.first = 0
	}
	w.n--
}

// Total returns the tokens in the window at now.
func (w *Exact) Total(now int64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire(now)
	return w.total
}

func (w *Exact) resetLocked(now int64) int64 {
	if w.n == 0 {
		return 0
	}
	return max(w.ring[w.first]+w.interval-now, 0)
}

// retryLocked is how long after now the window holds at most target tokens
// as its oldest slots leave; -1 if never.
func (w *Exact) retryLocked(now, target int64) int64 {
	if target < 0 {
		return -1
	}
	total := w.total
	for k := 0; k < w.n && total > target; k++ {
		i := w.at(k)
		if w.cnt != nil {
			total -= w.cnt[i]
		} else {
			total--
		}
		if total <= target {
			return max(w.ring[i]+w.interval-now, 0)
		}
	}
	if total > target {
		return -1
	}
	return 0
}

// Bytes is the memory the window holds now (tests and benchmarks).
func (w *Exact) Bytes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return 8*(cap(w.ring)+cap(w.cnt)) + sizeofExact
}

// Resized returns a window over the same interval sized for capacity that
// holds the passes w holds (as many of the newest as it can), so a limit
// that changes keeps counting what already passed instead of starting
// empty.
func (w *Exact) Resized(capacity float64) *Exact {
	nw := NewExact(w.interval, capacity)
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := 0; k < w.n; k++ {
		i := w.at(k)
		c := int64(1)
		if w.cnt != nil {
			c = w.cnt[i]
		}
		nw.push(w.ring[i], c)
	}
	return nw
}
