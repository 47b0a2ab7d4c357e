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
// It is a FIFO ring of slots holding pass times, sorted; a slot leaves the
// window once now >= its time + interval. A pass is stamped with the latest
// now any call gave (last), so a concurrent caller's slightly stale now can
// only make the window count a pass longer, never shorter. Memory grows with
// the passes actually held, up to MaxSlots slots (+2), whatever the limit.
//
// A pass may also be reserved for a moment ahead of now (Reserve: a
// prioritized call, which waits for it): the window then holds slots stamped
// after last, and every check counts them at their own time, so that no
// real interval holds more than the limit with them either: a call passes at
// t only if every interval containing t has room for it (EarliestRoom).
// Reserved slots are at most MaxSlots beyond the window's capacity.
//
// Safe for concurrent use: one short mutex guards it (measured faster on two
// cores than the lock-free bucket ring it replaced; see BenchmarkQpsCheck).
// The zero Exact is not usable; build it with NewExact.
type Exact struct {
	mu       sync.Mutex
	interval int64 // ns
	group    int64 // tokens a slot can hold: 1 up to MaxSlots tokens
	maxSlots int   // slots the passes up to last may take
	// ring holds the live slots' times from first, n of them, oldest
	// first; cnt (nil when group is 1) their token counts.
	ring  []int64
	cnt   []int64
	first int
	n     int
	total int64 // tokens in the live slots
	// last is the latest now a call gave: passes are stamped no earlier,
	// and slots stamped after it are reserved (Reserve).
	last int64
	// scratch is EarliestRoom's, kept for the next call (mu held).
	scratch []int64
}

// NewExact builds a window over interval ns able to hold up to capacity
// tokens (the highest limit it will be asked about; a warm-up rule's limit
// varies below its count).
func NewExact(interval int64, capacity float64) *Exact {
	w := &Exact{interval: max(interval, 1), group: 1, last: math.MinInt64}
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

// wholeLimit is limit in whole tokens.
func wholeLimit(limit float64) int64 {
	if limit >= math.MaxInt64/4 {
		return math.MaxInt64 / 4
	}
	return int64(math.Floor(limit))
}

// expire drops the slots that left the window by now (mu held) and moves
// last up to now.
func (w *Exact) expire(now int64) {
	w.last = max(w.last, now)
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

// stamp and weight are live slot k's time and tokens (mu held).
func (w *Exact) stamp(k int) int64 { return w.ring[w.at(k)] }

func (w *Exact) weight(k int) int64 {
	if w.cnt == nil {
		return 1
	}
	return w.cnt[w.at(k)]
}

// ahead reports whether a slot is reserved after last (mu held).
func (w *Exact) ahead() bool { return w.n > 0 && w.stamp(w.n-1) > w.last }

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
// With passes reserved ahead, every interval containing now must have room.
func (w *Exact) TryAdd(now, n int64, limit float64, quota bool, res *Result) bool {
	lim := wholeLimit(limit)
	w.mu.Lock()
	w.expire(now)
	var ok bool
	if !w.ahead() {
		ok = w.total+n <= lim && w.push(w.last, n)
	} else {
		ok = w.fits(w.last, n, lim) && w.insert(w.last, n)
	}
	if !ok {
		res.Total = w.total
		res.Reset = w.resetLocked(now)
		res.Retry = w.retryLocked(now, n, lim)
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
	if w.ahead() {
		w.insert(w.last, n)
	} else {
		w.push(w.last, n)
	}
	w.mu.Unlock()
}

// EarliestRoom returns the earliest moment at, from max(from, the latest
// now seen) up to until, at which n tokens fit: adding them at at leaves no
// interval of the window's length with more than limit tokens, reserved
// ones included. ok is false if there is none. It reserves nothing (see
// Reserve); now is the caller's clock, from may lie ahead of it. It costs
// one pass over the slots held.
//
// It looks at most one interval ahead of now, whatever until says (as
// Sentinel borrows only from the next window), so the passes a search
// reserves ahead are at most the limit: within MaxSlots slots up to
// MaxSlots tokens. Only from itself may lie further ahead: a throttled
// call's forward moment, fixed by its queue, which bounds those passes.
func (w *Exact) EarliestRoom(now, from, n int64, limit float64, until int64) (at int64, ok bool) {
	lim := wholeLimit(limit)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire(now)
	return w.earliest(max(from, w.last), n, lim, min(until, max(from, now+w.interval)))
}

// NextRoom is EarliestRoom without its horizon: the earliest moment from
// max(from, the latest now seen) at which n tokens fit if nothing else
// passes, however far ahead; ok is false only for more tokens than the
// window ever holds. It reserves nothing: it tells a refused call when to
// come back (Retry-After), where EarliestRoom's one interval ahead, which
// bounds what a search reserves, may hold no room.
func (w *Exact) NextRoom(now, from, n int64, limit float64) (at int64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire(now)
	return w.earliest(max(from, w.last), n, wholeLimit(limit), math.MaxInt64)
}

// Peek reads the window at now as a call of n tokens would find it, and
// counts nothing: res is what TryAdd fills for a refused call (Retry 0:
// the call fits now). A prioritized call's quota reads it, its pass
// already reserved, so the search (a pass over the slots) is made only
// when the tokens held leave no room by count: no interval holds more
// than all of them.
func (w *Exact) Peek(now, n int64, limit float64, res *Result) {
	lim := wholeLimit(limit)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire(now)
	res.Total = w.total
	res.Reset = w.resetLocked(now)
	res.Retry = 0
	if w.total+n > lim {
		res.Retry = w.retryLocked(now, n, lim)
	}
}

// Present is the latest now the window has seen, or now if later: the
// moment a call whose clock reading (now) is older than a pass already
// counted is decided at. A prioritized call's wait is measured from it.
func (w *Exact) Present(now int64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return max(now, w.last)
}

// Reserve counts n tokens at at (or at the latest now seen, if later) if
// they fit there as EarliestRoom says, and returns the time they are
// stamped with. The caller passes at that time, or gives the tokens back
// with Unreserve(now, stamp, n). ahead says the stamp lies beyond the
// latest now seen: a pass the caller must wait for. A stamp at the latest
// now seen is the present, even when the caller's own clock reading (now)
// is older than another caller's, so it is no wait.
func (w *Exact) Reserve(now, at, n int64, limit float64) (stamp int64, ahead, ok bool) {
	lim := wholeLimit(limit)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire(now)
	stamp = max(at, w.last)
	if !w.fits(stamp, n, lim) || !w.insert(stamp, n) {
		return 0, false, false
	}
	return stamp, stamp > w.last, true
}

// Unreserve takes back n tokens reserved at stamp (Reserve), as far as
// the window still holds them.
func (w *Exact) Unreserve(now, stamp, n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire(now)
	k := w.n - 1
	for k >= 0 && w.stamp(k) > stamp {
		k--
	}
	for n > 0 && k >= 0 && w.stamp(k) == stamp {
		d, _ := w.take(k, n)
		n -= d
		k--
	}
}

// take takes up to n tokens from live slot k, removing the slot once it
// holds none (mu held): it returns how many it took and whether it removed
// the slot (the older slots then moved up by one).
func (w *Exact) take(k int, n int64) (int64, bool) {
	i := w.at(k)
	d := int64(1)
	if w.cnt != nil {
		d = min(w.cnt[i], n)
		w.cnt[i] -= d
	}
	w.total -= d
	if w.cnt == nil || w.cnt[i] == 0 {
		w.remove(k)
		return d, true
	}
	return d, false
}

// fits reports whether n more tokens at t leave every interval [s, s+len)
// containing t (t-len < s <= t) with at most lim tokens (mu held, t at or
// after last). Such an interval holds the most with s at a slot's time or
// at t, as its count only drops when s passes a slot.
func (w *Exact) fits(t, n, lim int64) bool {
	room := lim - n
	if room < 0 {
		return false
	}
	lo := 0
	for lo < w.n && w.stamp(lo) <= t-w.interval {
		lo++
	}
	hi, sum := lo, int64(0)
	for {
		s := t
		if lo < w.n && w.stamp(lo) <= t {
			s = w.stamp(lo)
		}
		for hi < w.n && w.stamp(hi) < s+w.interval {
			sum += w.weight(hi)
			hi++
		}
		if sum > room {
			return false
		}
		if s == t {
			return true
		}
		for lo < w.n && w.stamp(lo) == s {
			sum -= w.weight(lo)
			lo++
		}
	}
}

// earliest is EarliestRoom from t on (mu held, t at or after last).
//
// Before the newest slot the candidates are t, each slot's time and each
// slot's time + interval, in order. At a candidate c the fullest interval
// containing it starts at c or at a slot's time in (c-interval, c], so with
// each slot's count from its time on (from[j]) and a deque of the largest
// of those in that range, all candidates cost one pass over the slots.
func (w *Exact) earliest(t, n, lim, until int64) (int64, bool) {
	if n > lim || t > until {
		return 0, false
	}
	if w.n == 0 || w.stamp(w.n-1) <= t {
		at := w.tail(t, n, lim)
		return at, at <= until
	}
	room, m, iv := lim-n, w.n, w.interval
	newest := w.stamp(m - 1)
	if cap(w.scratch) < 2*m {
		w.scratch = make([]int64, 2*m)
	}
	from, dq := w.scratch[:m], w.scratch[m:2*m]
	for j, hi, sum := 0, 0, int64(0); j < m; j++ {
		for hi < m && w.stamp(hi) < w.stamp(j)+iv {
			sum += w.weight(hi)
			hi++
		}
		from[j] = sum
		sum -= w.weight(j)
	}
	var (
		a, b       int   // next slot whose leaving, and whose time, is a candidate
		lo, hi     int   // the slots in [c, c+interval)
		in         int64 // their tokens
		next       int   // next slot to enter the deque
		head, tail int   // the deque: slots in (c-interval, c], from[] decreasing
	)
	for c := t; c < newest && c <= until; {
		for lo < m && w.stamp(lo) < c {
			if lo < hi {
				in -= w.weight(lo)
			}
			lo++
		}
		hi = max(hi, lo)
		for hi < m && w.stamp(hi) < c+iv {
			in += w.weight(hi)
			hi++
		}
		for next < m && w.stamp(next) <= c {
			for tail > head && from[dq[tail-1]] <= from[next] {
				tail--
			}
			dq[tail] = int64(next)
			tail++
			next++
		}
		for head < tail && w.stamp(int(dq[head])) <= c-iv {
			head++
		}
		most := in
		if head < tail {
			most = max(most, from[dq[head]])
		}
		if most <= room {
			return c, true
		}
		// the next candidate
		for a < m && w.stamp(a)+iv <= c {
			a++
		}
		for b < m && w.stamp(b) <= c {
			b++
		}
		nc := int64(math.MaxInt64)
		if a < m {
			nc = w.stamp(a) + iv
		}
		if b < m {
			nc = min(nc, w.stamp(b))
		}
		c = nc
	}
	at := w.tail(max(t, newest), n, lim)
	return at, at <= until
}

// tail is the earliest moment from t on, with no slot after t, at which
// the interval ending there has room for n tokens (mu held).
func (w *Exact) tail(t, n, lim int64) int64 {
	room := lim - n
	k, sum := 0, w.total
	for k < w.n && w.stamp(k) <= t-w.interval {
		sum -= w.weight(k)
		k++
	}
	for ; k < w.n && sum > room; k++ {
		sum -= w.weight(k)
		t = max(t, w.stamp(k)+w.interval)
	}
	return t
}

// push records n tokens at now, after every slot (mu held, expired slots
// dropped, no slot reserved after now). It fails, recording nothing, if the
// ring cannot hold them.
func (w *Exact) push(now, n int64) bool {
	if w.n > 0 {
		now = max(now, w.ring[w.at(w.n-1)]) // keep times in order
	}
	// group, not cnt: an empty grouped window has no cnt until grow, and
	// its first tokens must be counted in their slot, not only in total.
	if w.group == 1 {
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

// insert records n tokens at t in time order, before the slots reserved
// after t (mu held). A pass (t at or before last) may join the slot before
// it, whose time is then t, as push does; a reservation joins only a slot
// of its own time, so that no slot is stamped later than the last now but
// a reservation's. The passes up to last take at most maxSlots slots, the
// reservations MaxSlots more; it fails, recording nothing, past that.
func (w *Exact) insert(t, n int64) bool {
	p := w.n
	for p > 0 && w.stamp(p-1) > t {
		p--
	}
	past := t <= w.last
	join := int64(0) // tokens the slot before p takes
	if w.cnt != nil && p > 0 && (past || w.stamp(p-1) == t) {
		join = min(w.group-w.weight(p-1), n)
	}
	slots := int(n - join)
	if w.group > 1 { // cnt may not exist yet (empty window), group does
		slots = int((n - join + w.group - 1) / w.group)
	}
	if past {
		if p+slots > w.maxSlots {
			return false
		}
	} else if w.n+slots > w.maxSlots+MaxSlots {
		return false
	}
	if join > 0 {
		i := w.at(p - 1)
		w.cnt[i] += join
		w.ring[i] = t
	}
	w.grow(w.n + slots)
	rest := n - join
	for rest > 0 {
		d := int64(1)
		if w.cnt != nil {
			d = min(w.group, rest)
		}
		for j := w.n; j > p; j-- {
			w.ring[w.at(j)] = w.ring[w.at(j-1)]
			if w.cnt != nil {
				w.cnt[w.at(j)] = w.cnt[w.at(j-1)]
			}
		}
		w.ring[w.at(p)] = t
		if w.cnt != nil {
			w.cnt[w.at(p)] = d
		}
		w.n++
		p++
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
	size = max(min(size, w.maxSlots), k)
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
// taken back, nor are reserved ones (Unreserve).
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
		if w.ring[i] < at || w.ring[i] > w.last {
			return // left, never here, or reserved
		}
		d, removed := w.take(k, n)
		n -= d
		if !removed {
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

// Total returns the tokens in the window at now, reserved ones included.
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

// retryLocked is how long after now n tokens fit, if nothing else passes;
// -1 if never.
func (w *Exact) retryLocked(now, n, lim int64) int64 {
	at, ok := w.earliest(w.last, n, lim, math.MaxInt64)
	if !ok {
		return -1
	}
	return max(at-now, 0)
}

// Bytes is the memory the window holds now (tests and benchmarks).
func (w *Exact) Bytes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return 8*(cap(w.ring)+cap(w.cnt)) + sizeofExact
}

// Resized returns a window over interval sized for capacity that holds the
// passes w holds, as many of the newest as it can, so a limit that changes
// keeps counting what already passed instead of starting empty. The newest
// passes are what decides the next call: a lower limit must see the last
// second's passes, not the oldest ones, which are about to leave. At least
// capacity tokens are kept (the slot before the newest may go whole in a
// grouped window), which is all the new limit looks at. A longer interval
// cannot see passes w already let go.
func (w *Exact) Resized(interval int64, capacity float64) *Exact {
	nw := NewExact(interval, capacity)
	w.mu.Lock()
	defer w.mu.Unlock()
	nw.last = w.last
	// Oldest first, so each insert appends; when nw is full the oldest slot
	// it holds makes room, which leaves the newest.
	for k := 0; k < w.n; k++ {
		t, n := w.stamp(k), w.weight(k)
		slots := nw.maxSlots
		if t > nw.last {
			slots += MaxSlots // reserved ahead: insert allows MaxSlots more
		}
		n = min(n, int64(slots)*nw.group) // what an empty nw can take
		for !nw.insert(t, n) && nw.n > 0 {
			nw.total -= nw.weight(0)
			nw.remove(0)
		}
	}
	return nw
}
