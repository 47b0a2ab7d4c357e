package proxy

import (
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"sluice/config"
	"sluice/hotparam"
	"sluice/limiter"
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
	maxBody     int64  // maxBodyBytes: a larger request body is answered 413 (0: no cap)
	keepCost    bool   // keepCostHeaders: countOn responseHeader's headers reach the client

	guards   guards
	policies *policyNames // the resource's RateLimit policy names
	obs      Observer
	// clientAddr: an authority rule of the resource names addresses, so
	// the client's address is read before the guards.
	clientAddr bool
	// prio says which calls are prioritized (routes' prioritized), occupy
	// how long such a call may wait (ns); waits counts the waits.
	prio   config.Priority
	occupy int64
	waits  prioritizedObserver
	// timeWrites: the snapshot has breakers, which judge the upstream's
	// time: the exchange times the client's reading of the answer, to be
	// taken out of the time a breaker sees (exchange.clientWait).
	timeWrites bool
	// holdsSlot: the route's calls may hold a slot in flight (slotRules),
	// to be released, and the upstream call cancelled, as soon as the
	// client leaves: auto sends them the standard path.
	holdsSlot bool
	mode      forwarderMode
	std       forwarder
	fast      forwarder // nil: the route cannot use the fast path
	blocked   blockResponses
}

// serve is the hot path: origin, the route's guards in a loop (in the
// documented order: docs/rules.md#combining-rules), an optional throttle
// wait, then forwarding. params is the routing context holding the path
// parameters, v the request's view (readTarget).
func (rt *route) serve(w http.ResponseWriter, r *http.Request, v view, params *chi.Context) {
	s := rt.snap
	start := s.clock.Now()
	ex := s.pool.get(w, r, v, s.sources, params)
	defer s.pool.put(ex)

	if rt.maxBody > 0 && r.ContentLength > rt.maxBody {
		// Its length says it is over the cap: answered before any guard
		// counts it and before the upstream sees a byte.
		rt.tooLarge(ex, start)
		return
	}

	if rt.stripPrefix != "" && stripsToDot(ex.view.path, rt.stripPrefix) {
		// The path the upstream would get holds a dot segment (SPEC §11).
		rt.badRequest(ex, bodyBadPath, start)
		return
	}

	// The sources that must give one value are read before any guard, so
	// a request that cannot be decided on is refused before it counts.
	var origin string
	if s.originSrc.Kind != "" {
		var ok bool
		if origin, _, ok = ex.one(s.originSrc); !ok {
			rt.badRequest(ex, bodyAmbiguous, start)
			return
		}
	}
	if !rt.upstream.hashKey(ex) {
		rt.badRequest(ex, bodyAmbiguous, start)
		return
	}

	c := &ex.call
	c.origin, c.n, c.values, c.path, c.occupy = origin, rt.n, ex, ex.view.path, 0
	c.keepCost = rt.keepCost
	if rt.prio.All {
		c.occupy = rt.occupy
	} else if rt.prio.Source.Kind != "" {
		// A request with several distinct values is not prioritized.
		if v, found, ok := ex.one(rt.prio.Source); found && ok && v == rt.prio.Value {
			c.occupy = rt.occupy
		}
	}
	if rt.clientAddr {
		c.addr, _ = s.sources.client(r)
	}
	if rt.blocked.headers {
		c.wantQuotas = true
		c.quotas.names, c.quotas.all, c.quotas.key = rt.policies, s.policies, s.pkKey
		c.rateLimit, c.legacy, c.clock = s.rateLimit, rt.blocked.legacy, s.clock
	}
	var (
		wait time.Duration
		dry  int
		prio bool
		sent = start // when the call is forwarded: after its wait, if any
	)
	gs := rt.guards.list[:rt.guards.n]
	for i, g := range gs {
		tok, v := g.enter(start, c)
		if v.Blocked {
			if v.Reason == limiter.ReasonNone && ex.tooMany {
				// A param rule's source has more values than a request may
				// give: a bad request, which counts nowhere. (A dryRun
				// rule's source may have too many while a later rule
				// blocks: that block stands.)
				c.cancel(start, limiter.ReasonNone)
				rt.badRequest(ex, bodyTooManyValues, start)
				return
			}
			c.cancel(start, v.Reason)
			for _, later := range gs[i+1:] {
				later.refused(start, c)
			}
			if v.RetryAfter > 0 {
				retry := int64(v.RetryAfter)
				had := c.quotas.n
				for _, g := range gs[i:] {
					retry = g.room(start, c, retry)
				}
				v.RetryAfter = time.Duration(max(retry, 0))
				switch {
				case retry < 0:
					// A rule the call never passes: no moment to tell, so
					// neither Retry-After nor a RateLimit t that promises one.
					v.HasQuota = false
				case !v.HasQuota && c.wantQuotas && c.quotas.n > had:
					// A guard without a quota (the system guard) refused
					// it, and a later rule needs longer: RateLimit names
					// that rule, as for any refusal (its quota came last).
					v.HasQuota, v.Quota = true, c.quotas.list[c.quotas.n-1].q
				}
			}
			rt.reject(ex, origin, v, start)
			return
		}
		c.hold(tok)
		wait, dry, prio = max(wait, v.Wait), dry+v.DryRun, prio || v.Prioritized
	}
	if c.occupy > 0 {
		v := c.reservePending(start)
		if v.Blocked {
			c.cancel(start, v.Reason)
			rt.reject(ex, origin, v, start)
			return
		}
		wait, prio = max(wait, v.Wait), prio || v.Prioritized
	}
	for ; dry > 0; dry-- {
		rt.obs.DryRun()
		if e := s.log.Debug(); e.Enabled() {
			e.Str("resource", rt.resource).Str("origin", origin).Str("reason", limiter.ReasonDryRun.String()).
				Msg("would block (dryRun)")
		}
	}
	if prio && rt.waits != nil {
		rt.waits.PrioritizedWait()
	}
	if wait > 0 {
		// A queued call is not in flight (Sentinel counts a call once its
		// flow checks, their sleep included, are over): it holds no
		// system.maxConcurrency slot while it waits, and takes one when its
		// wait ends if one is free.
		c.sys.Queue()
		if !s.queueWait(r, wait) {
			// The client left while queued: it is not forwarded and counts
			// nowhere but in the access log.
			now := s.clock.Now()
			c.cancel(now, limiter.ReasonNone)
			if s.accessLog {
				s.log.Info().Str("resource", rt.resource).Str("origin", origin).Str("method", r.Method).
					Str("path", ex.view.path).Int("status", statusClientClosed).
					Dur("latency", time.Duration(now-start)).Str("decision", "clientGone").Msg("access")
			}
			leave()
		}
		now := s.clock.Now()
		if v := c.sys.Resume(now); v.Blocked {
			c.cancel(now, v.Reason)
			rt.reject(ex, origin, v, start)
			return
		}
		sent = now
	}
	if c.wantQuotas {
		// Every quota that counted the call; RateLimit names the nearest to
		// blocking. Set once the call is sure to be forwarded: a call that
		// waited may still be refused for system.maxConcurrency.
		c.quotas.set(ex.Header(), s.rateLimit, rt.blocked.legacy, false)
	}
	rt.forward(ex, r, start, sent, origin)
}

// forward sends the request upstream and settles the guards' tokens
// whatever happens, including a panic (ReverseProxy aborts a broken response
// with http.ErrAbortHandler), so in-flight counts are always released.
// start is when the request came, sent when it was forwarded (after a
// throttle wait).
func (rt *route) forward(ex *exchange, r *http.Request, start, sent int64, origin string) {
	s := rt.snap
	if rt.timeWrites {
		ex.clock = s.clock
	}
	if asksUpgrade(r) && (rt.upstream.protocol != config.ProtocolHTTP1 || !keepUpgrades(r, s.upgrades)) {
		// HTTP/2 has no Upgrade, and a protocol not in server.upgrades is
		// not switched to: the upstream gets a plain request.
		dropUpgrade(r)
	}
	fwd := rt.forwarderFor(r, &ex.view)
	ex.watchBody(r, rt.upstream.timeout, rt.maxBody, rt.upstream.protocol != config.ProtocolHTTP1)
	finished := false
	ex.try.now = start
	if r.ProtoMajor == 2 {
		ex.guard = newSendGuard(ex.ResponseWriter, s.sendTimeout)
	}
	defer func() {
		if ex.guard != nil {
			ex.guard.done()
		}
		if ex.tunnel != nil {
			ex.tunnel.set.remove(ex.tunnel)
			ex.tunnel.stopIdle()
		}
		end := s.clock.Now()
		answered := end // where the response time ends
		if ex.switched != 0 {
			// A tunnel (WebSocket): the upstream answered with its 101. How
			// long the client then keeps it open is no response time: a
			// slowRatio breaker, the system guard's maxAvgRtMs, the
			// resource's avgRt and the latency histogram would take healthy
			// WebSockets for a slow upstream.
			answered = ex.switched
		}
		elapsed := time.Duration(answered - start)
		gone := ex.clientCtx.Err() != nil || ex.writeFailed
		rt.settle(ex, end, finished, gone)
		broken := !finished || ex.failed
		failed := !gone && (broken || ex.status >= 500)
		// The breakers and countOn failure rules judge the upstream's answer
		// by its status; none came when the exchange broke (unless the
		// client's leaving broke it: then the answer it had begun stands).
		// A client whose own body failed (over maxBodyBytes, too slow,
		// broken) was answered by the gateway (413, 408, 400): that answer
		// says nothing of the upstream, as a client that left says nothing,
		// so a failure rule's "4xx" does not count it as a failed call.
		status := ex.status
		if broken && !gone || ex.bodyFailed() {
			status = 0
		}
		answer := status
		if answer == 0 && !ex.failed && !ex.bodyFailed() {
			// The upstream's status, if it was handed to the client (the
			// gateway's own answers come after ex.failed): its body broke
			// after it.
			answer = ex.status
		}
		abandoned := gone && (ex.status == 0 || ex.late) || ex.bodyFailed()
		if abandoned && !ex.bodyFailed() && ex.out.sent && !ex.late {
			// The client hung up on a request the upstream had: a failure
			// rule counts the guess it cannot judge (hotparam.Unheard). One
			// that never left a dial was no guess. One answered after
			// its client left was judged: the rule counts that answer.
			answer = hotparam.Unheard
		}
		// A breaker judges the upstream: not the gateway's own queue, nor
		// the client's reading of the answer (SPEC §6's maxAllowedRtMs).
		upstreamRT := time.Duration(answered - sent - ex.clientWait)
		// The guards count the call as answered then (their response times
		// run until it); the slots it held are released now all the same.
		ex.call.exit(answered, outcome{rt: upstreamRT, failed: failed, status: status, answer: answer, abandoned: abandoned})
		if failed {
			rt.obs.Error(elapsed)
		} else {
			rt.obs.Pass(elapsed)
		}
		ex.call.observePass(elapsed, failed)
		if ex.body != nil && ex.body.tooLarge.Load() {
			rt.obs.TooLarge() // passed the guards, then its stream passed the cap
		}
		if s.accessLog {
			logged := ex.status
			if logged == 0 && gone {
				logged = statusClientClosed // nothing was written: there is no status to log
			}
			s.log.Info().Str("resource", rt.resource).Str("origin", origin).Str("method", r.Method).
				Str("path", ex.view.path).Int("status", logged).Bool("failed", failed).Bool("clientGone", gone).
				Dur("latency", elapsed).Str("decision", "pass").Str("forwarder", fwd.name()).Msg("access")
		}
	}()
	// Each forwarder bounds the exchange by the route timeout itself (the
	// fast one without a context, which would cost allocations).
	fwd.forward(ex, r)
	ex.call.strip(ex.Header()) // the trailers, before net/http writes them
	finished = true
	if ex.status == 0 && ex.clientCtx.Err() != nil {
		leave()
	}
}

// leave ends a request whose client went away before anything was written
// to it. Returning would have net/http answer 200 with no body in its
// place, which a client that only half-closed its connection (its request
// sent, then shutdown(SHUT_WR): net/http takes that for leaving) read as
// the upstream's answer. Nothing is sent instead: the connection, or the
// HTTP/2 stream, is cut, as nginx does (its 499). The deferred settling
// runs as for any return.
func leave() { panic(http.ErrAbortHandler) }

// statusClientClosed is the status the access log gives a request whose
// client left before any answer was written to it: nginx's 499 ("client
// closed request"), which log pipelines already read, where 0 reads as a
// field left out.
const statusClientClosed = 499

// tooLarge answers 413 to a request whose Content-Length is over the
// route's maxBodyBytes; it is counted as too large only, not as a pass or
// a block (SPEC §4).
func (rt *route) tooLarge(ex *exchange, start int64) {
	if b := clientBodyOf(ex.req); b != nil {
		b.tooLarge.Store(true) // its 413 lingers like a streamed one's (Gateway.ServeHTTP)
	}
	writeJSON(ex, http.StatusRequestEntityTooLarge, bodyTooLarge)
	rt.obs.TooLarge()
	if s := rt.snap; s.accessLog {
		s.log.Info().Str("resource", rt.resource).Str("method", ex.req.Method).
			Str("path", ex.view.path).Int("status", http.StatusRequestEntityTooLarge).
			Dur("latency", time.Duration(s.clock.Now()-start)).Str("decision", "tooLarge").Msg("access")
	}
}

// badRequest answers 400 to a request the guards cannot decide on (SPEC §3
// Sources: Several values); it is counted as neither a pass nor a block.
func (rt *route) badRequest(ex *exchange, body []byte, start int64) {
	writeJSON(ex, http.StatusBadRequest, body)
	if s := rt.snap; s.accessLog {
		s.log.Info().Str("resource", rt.resource).Str("method", ex.req.Method).
			Str("path", ex.view.path).Int("status", http.StatusBadRequest).
			Dur("latency", time.Duration(s.clock.Now()-start)).Str("decision", "badRequest").
			Str("error", strings.TrimSuffix(string(body), "\n")).Msg("access")
	}
}
