package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"sluice/hotparam"
	"sluice/limiter"
	"sluice/limiter/circuit"
	"sluice/limiter/system"
)

// route is one configured route of one snapshot: everything a request needs
// is resolved here at build time, so serving does no lookups by name.
type route struct {
	snap        *Snapshot
	resource    string
	entrance    string
	n           int64 // acquireCount
	upstream    *upstream
	stripPrefix string
	stripOrigin string // origin header removed before forwarding ("" = keep)

	flow     *limiter.Checker
	params   *hotparam.Checker // nil: no param rules
	breakers *circuit.Breakers // nil: no degrade rules
	obs      Observer
	mode     forwarderMode
	std      forwarder
	fast     forwarder // nil: the route cannot use the fast path
	blocked  blockResponses
}

// tokens are what a passed request holds until its response is finished.
type tokens struct {
	sys   system.Token
	flow  limiter.Token
	param hotparam.Token
	cb    circuit.Token
	hasP  bool
	hasCB bool
}

// cancel gives back everything a request took that was never forwarded;
// reason is the guard that stopped it (None: the client went away).
func (t *tokens) cancel(now int64, reason limiter.Reason) {
	if t.hasCB {
		t.cb.Cancel(now)
	}
	if t.hasP {
		t.param.Cancel(now)
	}
	t.flow.Cancel(now, reason)
	t.sys.Cancel(now)
}

// exit settles a forwarded call. abandoned: the client left before any
// answer, which says nothing about the upstream's health, so a breaker
// neither counts it as a success nor spends its probe on it.
func (t *tokens) exit(now int64, rt time.Duration, failed, abandoned bool) {
	if t.hasCB {
		if abandoned {
			t.cb.Abandon(now, rt)
		} else {
			t.cb.Exit(now, rt, failed)
		}
	}
	if t.hasP {
		t.param.Exit(now)
	}
	t.flow.Exit(now, failed)
	// An abandoned call is no evidence of capacity for the adaptive check.
	t.sys.Exit(now, failed || abandoned)
}

// ServeHTTP serves a request chi routed itself (router falls back to chi
// only for what it cannot resolve, so this is rare).
func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt.serve(w, r, chi.RouteContext(r.Context()))
}

// serve is the hot path: origin, checks in the documented order (system, flow,
// param, degrade: docs/rules.md#combining-rules), an optional throttle wait, then forwarding. params is
// the routing context holding the path parameters.
func (rt *route) serve(w http.ResponseWriter, r *http.Request, params *chi.Context) {
	s := rt.snap
	start := s.clock()
	ex := s.pool.get(w, r, s.sources, params)
	defer s.pool.put(ex)

	var origin string
	if s.originSrc.Kind != "" {
		origin, _ = ex.Value(s.originSrc)
	}

	var t tokens
	var v limiter.Verdict
	t.sys, v = s.System.Enter(start)
	if v.Blocked {
		rt.flow.Block(start, origin, rt.n)
		rt.reject(ex, origin, v, start)
		return
	}
	var fv limiter.Verdict
	t.flow, fv = rt.flow.Enter(start, origin, rt.n)
	if fv.Blocked {
		t.sys.Cancel(start)
		rt.reject(ex, origin, fv, start)
		return
	}
	wait, dry := fv.Wait, fv.DryRun
	quota, hasQuota := fv.Quota, fv.HasQuota
	if rt.params != nil {
		t.param, v = rt.params.Enter(start, ex, rt.n)
		if v.Blocked {
			t.flow.Cancel(start, limiter.ReasonParam)
			t.sys.Cancel(start)
			rt.reject(ex, origin, v, start)
			return
		}
		t.hasP = true
		wait, dry = max(wait, v.Wait), dry+v.DryRun
		// The RateLimit fields describe the tightest qps quota that counted the call.
		if v.HasQuota && (!hasQuota || v.Quota.Remaining < quota.Remaining) {
			quota, hasQuota = v.Quota, true
		}
	}
	if rt.breakers != nil {
		t.cb, v = rt.breakers.Enter(start)
		if v.Blocked {
			t.hasCB = false
			t.cancel(start, limiter.ReasonDegrade)
			rt.reject(ex, origin, v, start)
			return
		}
		t.hasCB = true
	}
	for ; dry > 0; dry-- {
		rt.obs.DryRun()
		if e := s.log.Debug(); e.Enabled() {
			e.Str("resource", rt.resource).Str("origin", origin).Str("reason", limiter.ReasonDryRun.String()).
				Msg("would block (dryRun)")
		}
	}
	if hasQuota && s.rateLimitHeaders {
		setRateLimit(ex.Header(), &quota)
	}
	if wait > 0 && !sleep(r.Context(), wait) {
		// The client left while queued: it is not forwarded and counts nowhere.
		t.cancel(s.clock(), limiter.ReasonNone)
		return
	}
	rt.forward(ex, r, start, &t, origin)
}

// forward sends the request upstream and settles the tokens whatever
// happens, including a panic (ReverseProxy aborts a broken response with
// http.ErrAbortHandler), so in-flight counts are always released.
func (rt *route) forward(ex *exchange, r *http.Request, start int64, t *tokens, origin string) {
	s := rt.snap
	fwd := rt.forwarderFor(r)
	ex.watchBody(r, rt.upstream.timeout)
	finished := false
	defer func() {
		end := s.clock()
		elapsed := time.Duration(end - start)
		gone := ex.clientCtx.Err() != nil
		failed := !gone && (!finished || ex.failed || ex.status >= 500)
		t.exit(end, elapsed, failed, gone && ex.status == 0)
		if failed {
			rt.obs.Error(elapsed)
		} else {
			rt.obs.Pass(elapsed)
		}
		if s.accessLog {
			s.log.Info().Str("resource", rt.resource).Str("origin", origin).Str("method", r.Method).
				Str("path", r.URL.Path).Int("status", ex.status).Bool("failed", failed).Bool("clientGone", gone).
				Dur("latency", elapsed).Str("decision", "pass").Str("forwarder", fwd.name()).Msg("access")
		}
	}()
	// Each forwarder bounds the exchange by the route timeout itself (the
	// fast one without a context, which would cost allocations).
	fwd.forward(ex, r)
	finished = true
}

// sleep waits d unless ctx ends first; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
