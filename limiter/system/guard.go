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
//   - maxConcurrency: calls in flight never exceed it (CAS on one counter).
//   - maxAvgRtMs: blocks while the average response time of the calls that
//     completed in the last second (the same window) exceeds it and at least one other call is
//     in flight. Sentinel blocks regardless of in-flight calls; we let a call
//     through to an idle gateway so the average can recover without waiting
//     out the window.
//   - maxCpuUsage alone: blocks while usage > maxCpuUsage.
//   - adaptive: Sentinel's checkBbr: blocks when more than one other call is
//     in flight and in-flight > maxSuccessQps x minRt, where maxSuccessQps is
//     the most successful calls in one second of the last ten, and minRt is
//     the smallest per-second average RT of successes (Kratos' BBR; Sentinel
//     takes the single fastest call, which on a spread RT distribution sheds a
//     busy but healthy gateway). Without a completed second of history it
//     never blocks. With maxCpuUsage also set, CPU usage is the trigger as in
//     Sentinel: BBR blocks only while usage > maxCpuUsage, and high CPU alone
//     blocks nothing.
//
// A blocked Verdict has Reason limiter.ReasonSystem and RetryAfter 0 (unknown).
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
	qps    *window.Exact // maxQps: the passes of the last second
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
		switch {
		case prev != nil && prev.qps != nil && prev.maxQps == g.maxQps:
			g.qps = prev.qps
		case prev != nil && prev.qps != nil:
			g.qps = prev.qps.Resized(g.maxQps) // the last second's passes still count
		default:
			g.qps = window.NewExact(qpsInterval, g.maxQps)
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
	var others int64
	if g.maxConc > 0 {
		for {
			n := st.inFlight.Load()
			if n >= g.maxConc {
				return Token{}, blocked
			}
			if st.inFlight.CompareAndSwap(n, n+1) {
				others = n
				break
			}
		}
	} else {
		others = st.inFlight.Add(1) - 1
	}
	if !g.locked {
		if g.maxCpu > 0 && g.cpuHigh() {
			st.inFlight.Add(-1)
			return Token{}, blocked
		}
		return Token{st: st, enter: now}, limiter.Verdict{}
	}

	st.mu.Lock()
	st.advance(now)
	ok := g.admit(now, others)
	st.mu.Unlock()
	if ok && g.qps != nil {
		var r window.Result
		ok = g.qps.TryAdd(now, 1, g.maxQps, false, &r)
	}
	if !ok {
		st.inFlight.Add(-1)
		return Token{}, blocked
	}
	return Token{st: st, qps: g.qps, enter: now, record: true}, limiter.Verdict{}
}

// qpsInterval is maxQps's window: one second.
const qpsInterval = int64(1e9)

// admit applies the checks on the statistics windows (st.mu held, windows
// advanced); maxQps comes last, in its own window, so that only calls that
// pass are counted there.
func (g *Guard) admit(now, others int64) bool {
	st := g.st
	if done, rtSum := st.completed(); g.maxRt > 0 && others >= 1 && done > 0 && rtSum/done > g.maxRt {
		return false
	}
	cpuHigh := g.maxCpu > 0 && g.cpuHigh()
	if g.adaptive {
		if (g.maxCpu == 0 || cpuHigh) && others > 1 {
			if capacity, ok := st.capacity(now); ok && float64(others) > capacity {
				return false
			}
		}
		return true
	}
	return !cpuHigh
}

func (g *Guard) cpuHigh() bool { return g.cpu != nil && g.cpu.Usage() > g.maxCpu }

// Token is one call that passed Enter. Exactly one of Exit or Cancel must be
// called on it; a second call, or either on the zero Token, does nothing. A
// Token is used by one goroutine.
type Token struct {
	st     *stats
	qps    *window.Exact // counted the pass (maxQps), else nil
	enter  int64
	record bool // Exit records RT and success in the windows
}

// Exit finishes a forwarded call: it records its response time (now - enter)
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
		st.complete(now, max(now-t.enter, 0), failed)
		st.mu.Unlock()
	}
	st.inFlight.Add(-1)
	*t = Token{}
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
	t.st.inFlight.Add(-1)
	*t = Token{}
}
