// Package system is whole-gateway protection (Sentinel's system adaptive
// protection, SystemRuleManager): it checks every inbound call, before any
// resource rule, against the gateway's own QPS, concurrency, average response
// time, CPU usage and, in adaptive mode, a BBR-style saturation test.
//
// The package knows nothing of HTTP and never reads the clock in its checks:
// callers pass now (ns on a monotonic timeline with any origin).
//
// Layer 4 of docs/architecture.md: it imports limiter, limiter/window, config
// and internal/ mechanisms; knows nothing of HTTP.
package system

import (
	"math"
	"time"

	"sluice/config"
	"sluice/limiter"
	"sluice/limiter/window"
)

// CPUUsage reports CPU usage in 0..1. It is sampled elsewhere (ProcessCPU) so
// that Usage is a cheap load; it must be safe for concurrent use.
type CPUUsage interface{ Usage() float64 }

// Guard is the gateway-wide guard of one rules snapshot. It is immutable after
// New and safe for concurrent use; its statistics live in a value shared with
// the Guards built from it on reloads. A nil or all-off Guard passes
// everything at the cost of one branch.
//
// Checks, in Sentinel's order; a zero field is off:
//   - maxQps: a call passes while passes in the last second + 1 <= maxQps,
//     in the exact sliding window flow rules use (window.Exact): no real
//     one-second interval passes more than maxQps, a client keeping to it is
//     never refused, and a call that is later cancelled is taken back.
//     Under 1 it reads as flow rules read a qps count under one call a
//     second: one pass per the fewest whole seconds that hold one (0.5: one
//     every 2 s), as a window of whole calls would otherwise pass none.
//   - maxConcurrency: calls in flight never exceed it (CAS on one counter).
//     A call waiting to be forwarded (Token.Queue) is not in flight.
//   - maxAvgRtMs: blocks while the average response time of the calls that
//     completed in the last second (the same window) exceeds it and at
//     least one other call waits for its answer. Sentinel blocks regardless
//     of in-flight calls; we let a call through to an idle gateway (open
//     tunnels aside) so the average can recover without waiting out the
//     window.
//   - maxCpuUsage alone: blocks while usage > maxCpuUsage.
//   - adaptive: Sentinel's checkBbr, made to tell queueing from traffic
//     arriving at random: the bandwidth-delay product c = maxSuccessQps x
//     minRt, where maxSuccessQps is the most successful calls in one second
//     of the last ten, and minRt is the smallest per-second average RT of
//     successes in the seconds that carried a quarter of the busiest one's
//     (minRtShare; Kratos' BBR; Sentinel takes the single
//     fastest call, which on a spread RT distribution sheds a busy but
//     healthy gateway). Calls arriving at random put more than c in flight
//     now and then without queueing, and a guard that sheds those loses
//     their successes from maxSuccessQps and sheds ever more (a third of a
//     healthy upstream's calls, for good). So a call is blocked when more
//     than three other calls wait for their answer (Sentinel: one in
//     flight; a few calls' times say little, and with one or two in flight
//     on average their noise read as queueing; an open tunnel was
//     answered, Token.Answered) and more than a limit: swing(c) while
//     the calls completed lately took about minRt, falling to queued(c) as
//     their time reaches queueingRt x minRt (calls queue: the upstream or
//     the gateway is saturated), and to c/2 in one second of probeEvery
//     while it sheds, which drains the queue so that minRt does not rise
//     with it. Without a whole second of history it never blocks. With
//     maxCpuUsage also set, CPU usage is the trigger as in Sentinel: the
//     check applies only while usage > maxCpuUsage, and high CPU alone
//     blocks nothing.
//
// A blocked Verdict has Reason limiter.ReasonSystem. Its RetryAfter is when
// maxQps's window will take the call again when maxQps refused it, and 0
// (unknown) for the other checks, which wait on load going down.
type Guard struct {
	maxQps   float64
	maxConc  int64
	maxRt    int64 // ns
	maxCpu   float64
	adaptive bool
	cpu      CPUUsage

	on     bool // any check at all
	count  bool // track calls in flight
	locked bool // a check needs the windows (anything but maxConcurrency, cpu)
	st     *stats
	qps    *window.Exact // maxQps: the passes of its window (qpsWindow)
	qpsLim float64       // whole passes qps may hold
}

// New builds the gateway-wide guard for cfg (validated by config: no
// negative limit), keeping the statistics of prev (nil at first). cpu may be nil when maxCpuUsage is 0; a nil cpu reads as 0.
//
// Calls in flight are counted only while a check needs them; a reload that
// turns maxConcurrency, maxAvgRtMs or adaptive on starts from the calls that
// enter after it.
func New(cfg config.System, prev *Guard, cpu CPUUsage) *Guard {
	g := &Guard{
		maxQps:   cfg.MaxQps,
		maxConc:  cfg.MaxConcurrency,
		maxRt:    cfg.MaxAvgRtMs * 1e6,
		maxCpu:   cfg.MaxCpuUsage,
		adaptive: cfg.Adaptive,
		cpu:      cpu,
	}
	g.locked = g.maxQps > 0 || g.maxRt > 0 || g.adaptive
	g.count = g.locked || g.maxConc > 0
	g.on = g.count || g.maxCpu > 0
	if prev != nil {
		g.st = prev.st
	} else {
		g.st = newStats()
	}
	if g.maxQps > 0 {
		var ns int64
		ns, g.qpsLim = qpsWindow(g.maxQps)
		switch {
		case prev != nil && prev.qps != nil && prev.maxQps == g.maxQps:
			g.qps = prev.qps
		case prev != nil && prev.qps != nil:
			g.qps = prev.qps.Resized(ns, g.qpsLim) // the last second's passes still count
		default:
			g.qps = window.NewExact(ns, g.qpsLim)
		}
	}
	return g
}

var blocked = limiter.Verdict{Blocked: true, Reason: limiter.ReasonSystem}

// Enter checks an inbound call. A passed call must be finished with the
// Token's Exit or Cancel. Enter allocates nothing.
func (g *Guard) Enter(now int64) (Token, limiter.Verdict) {
	if g == nil || !g.on {
		return Token{}, limiter.Verdict{}
	}
	if !g.count { // maxCpuUsage alone
		if g.cpuHigh() {
			return Token{}, blocked
		}
		return Token{}, limiter.Verdict{}
	}
	st := g.st
	others, ok := st.take(g.maxConc)
	if !ok {
		return Token{}, blocked
	}
	if !g.locked {
		if g.maxCpu > 0 && g.cpuHigh() {
			st.inFlight.Add(-1)
			return Token{}, blocked
		}
		return Token{st: st, enter: now, since: now, maxConc: g.maxConc}, limiter.Verdict{}
	}

	st.mu.Lock()
	st.advance(now)
	ok = g.admit(now, others)
	st.mu.Unlock()
	if !ok {
		st.inFlight.Add(-1)
		return Token{}, blocked
	}
	if g.qps != nil {
		var r window.Result
		if !g.qps.TryAdd(now, 1, g.qpsLim, false, &r) {
			// maxQps, alone of the checks, knows when a pass will fit again.
			st.inFlight.Add(-1)
			v := blocked
			v.RetryAfter = time.Duration(r.Retry)
			return Token{}, v
		}
	}
	return Token{st: st, qps: g.qps, qpsLim: g.qpsLim, enter: now, since: now, maxConc: g.maxConc, record: true}, limiter.Verdict{}
}

// qpsInterval is maxQps's window from 1 up: one second.
const qpsInterval = int64(1e9)

// qpsWindow is the exact window maxQps is decided in and the whole passes it
// holds. The window counts whole calls, so a limit under 1 a second would
// pass nothing; as for a flow rule's count under one (limiter's ruleDef),
// the window grows to the fewest whole seconds that hold one pass: 0.5 is
// one pass in any 2 s, 0.3 one in any 4 s (1.2 floored). The window is
// capped at ~73 years so that its length fits the window's arithmetic; a
// maxQps too small to hold one pass there passes nothing.
func qpsWindow(maxQps float64) (ns int64, limit float64) {
	return window.WholeCalls(maxQps, qpsInterval)
}

// admit applies the checks on the statistics windows (st.mu held, windows
// advanced); maxQps comes last, in its own window, so that only calls that
// pass are counted there.
func (g *Guard) admit(now, others int64) bool {
	st := g.st
	// The calls still waiting for their answer: an open tunnel was
	// answered (Token.Answered).
	waiting := max(others-st.open.Load(), 0)
	if done, rtSum := st.completed(); g.maxRt > 0 && waiting >= 1 && done > 0 && rtSum/done > g.maxRt {
		return false
	}
	cpuHigh := g.maxCpu > 0 && g.cpuHigh()
	if g.adaptive {
		if (g.maxCpu == 0 || cpuHigh) && waiting > fewWaiting {
			if limit, ok := st.adaptiveLimit(now); ok && float64(waiting) > limit {
				st.shed(now)
				return false
			}
		}
		return true
	}
	return !cpuHigh
}

// fewWaiting: with this many calls waiting or fewer, the adaptive check
// lets a call through (Sentinel: one): with one or two in flight on
// average, a few calls' times are mostly noise, which read as queueing.
const fewWaiting = 3

// adaptiveLimit is how many calls may wait for their answer (mu held, after
// advance): swing(c) while the calls completed lately took about minRt,
// falling to queued(c) as their time reaches queueingRt x minRt, and c/2 in
// a drained second (probing). ok is false without a whole second of
// history.
func (s *stats) adaptiveLimit(now int64) (limit float64, ok bool) {
	c, minRt, ok := s.capacity(now)
	if !ok {
		return 0, false
	}
	if s.probing() {
		return c / 2, true
	}
	limit = swing(c)
	if rt, ok := s.recentRt(); ok && rt > minRt {
		limit -= min((rt/minRt-1)/(queueingRt-1), 1) * (limit - queued(c))
	}
	return limit, true
}

// queueingRt: calls queue (the upstream or the gateway is saturated) when
// the calls completed lately took this many times minRt on average.
const queueingRt = 2

// swing is the most calls in flight that calls arriving at random put in
// flight now and then, with c in flight on average: c + 4 sqrt(c) + 4, past
// which they are queueing whatever their times say (a Poisson count passes
// it about once in a hundred thousand arrivals).
func swing(c float64) float64 { return c + 4*math.Sqrt(c) + 4 }

// queued is the most calls in flight admitted while calls queue: c and the
// usual part of the swing.
func queued(c float64) float64 { return c + math.Sqrt(c) + 1 }

func (g *Guard) cpuHigh() bool { return g.cpu != nil && g.cpu.Usage() > g.maxCpu }

// Token is one call that passed Enter. Exactly one of Exit or Cancel must be
// called on it; a second call, or either on the zero Token, does nothing. A
// call that waits before it is forwarded is Queued meanwhile. A Token is
// used by one goroutine.
type Token struct {
	st      *stats
	qps     *window.Exact // counted the pass (maxQps), else nil
	qpsLim  float64       // the limit qps counted it under, for Resume
	enter   int64         // when it passed: its maxQps pass's time (Resume moves it)
	since   int64         // in flight since: enter, or the end of its wait (Resume)
	maxConc int64         // the maxConcurrency it entered under, for Resume
	record  bool          // Exit records RT and success in the windows
	queued  bool          // between Queue and Resume: not counted in flight
	open    bool          // Answered: counted in st.open until Exit
}

// Queue takes a passed call out of the calls in flight while it waits (in a
// throttle queue, or for a prioritized call's reserved pass) before it is
// forwarded: a waiting call sends nothing upstream, and a slot it held
// would refuse other routes' calls (with maxConcurrency 1, one queued call
// would block the whole gateway). As in Sentinel, which counts a call in
// flight only once the flow checks, their sleep included, are over. End the
// wait with Resume, or Cancel the call.
func (t *Token) Queue() {
	if t.st == nil || t.queued {
		return
	}
	t.st.inFlight.Add(-1)
	t.queued = true
}

// Resume counts a queued call in flight again when its wait is over, at
// now. If maxConcurrency calls (of the limit the call entered under) are in
// flight by then the call is blocked, so that calls in flight never exceed
// it; the caller then Cancels the Token. Its maxQps pass moves from its
// entry to now, when it is forwarded: counted at its entry, it would have
// left the window while the call still waited, and a second holding the
// forward could pass maxQps others too. If the window has no room at now,
// the call is blocked. Its response time is counted from now: the
// adaptive check weighs the calls in flight against their time in flight,
// which the wait is not.
func (t *Token) Resume(now int64) limiter.Verdict {
	if t.st == nil || !t.queued {
		return limiter.Verdict{}
	}
	if t.qps != nil && now > t.enter {
		t.qps.Sub(now, t.enter, 1)
		var r window.Result
		if !t.qps.TryAdd(now, 1, t.qpsLim, false, &r) {
			t.qps = nil // given back above: Cancel has none to take back
			return blocked
		}
		t.enter = now
	}
	if _, ok := t.st.take(t.maxConc); !ok {
		return blocked
	}
	t.queued, t.since = false, now
	return limiter.Verdict{}
}

// Answered records, at now, an answer after which a forwarded call may
// last as long as it likes: a switch to a tunnel (a WebSocket's 101) or an
// event stream's head. The call's response time ends there (for
// maxAvgRtMs; it is no evidence of capacity), and while it stays open the
// call no longer waits for its answer (maxAvgRtMs, the adaptive check),
// though it still holds its maxConcurrency slot until Exit. The adaptive
// check weighs the calls waiting for their answer against the
// bandwidth-delay product: counted, every open WebSocket stood above it
// for its whole life, and a gateway with more open tunnels than a few
// seconds' calls shed every call.
func (t *Token) Answered(now int64) {
	if t.st == nil || t.queued || t.open {
		return
	}
	// Its time counts for maxAvgRtMs only, not for the adaptive check: a
	// handshake or a stream's head is not the work the upstream's other
	// calls do (40 handshakes in a quiet second made their 2 ms minRt, and
	// streams whose head took a second had the check see a queue).
	if t.record {
		t.st.mu.Lock()
		t.st.headed(now, max(now-t.since, 0))
		t.st.mu.Unlock()
		t.record = false
	}
	t.st.open.Add(1)
	t.open = true
}

// Exit finishes a forwarded call: it records its response time (now - since)
// and whether it failed (upstream 5xx, transport failure or timeout). Pass
// failed = true also for a call whose client left before the answer: its
// time still counts towards maxAvgRtMs, but it is no evidence of capacity
// for the adaptive check, which counts successes only.
func (t *Token) Exit(now int64, failed bool) {
	if t.st == nil {
		return
	}
	st := t.st
	if t.record {
		st.mu.Lock()
		st.complete(now, max(now-t.since, 0), failed)
		st.mu.Unlock()
	}
	t.release()
}

// Cancel finishes a call that was not forwarded after all (a later check
// blocked it or the client left): its pass is taken back and nothing else is
// recorded.
func (t *Token) Cancel(now int64) {
	if t.st == nil {
		return
	}
	if t.qps != nil {
		t.qps.Sub(now, t.enter, 1)
	}
	t.release()
}

// release takes the call out of the counts it is in and zeroes the Token.
func (t *Token) release() {
	if !t.queued {
		t.st.inFlight.Add(-1)
	}
	if t.open {
		t.st.open.Add(-1)
	}
	*t = Token{}
}
