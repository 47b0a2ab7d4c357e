package proxy

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/rs/zerolog"
)

// transport is what differs between the fast and the standard path: it
// sends one prepared attempt to one target and streams the target's answer
// back to the client. It decides nothing: which target, whether to send
// again, which body is kept, what is reported to the upstream pool are the
// attempts loop's (route.attempts), one policy for both (as Caddy's
// reverseproxy loop owns its retries over any http.RoundTripper).
//
// A transport that gets a 502, 503 or 504 answer asks p.mayDrop whether it
// is sent again; if so it discards the answer. send's results:
//   - (0, err): no answer (connect failure, reset, timeout, a malformed or
//     invalid answer); nothing was written to the client.
//   - (code, errDropped): the target answered code (502/503/504) and
//     p.mayDrop took a retry: the answer was discarded, nothing written.
//   - (code, err): the answer broke before anything reached the client.
//   - (code, nil): the answer was written to the client (a break while it
//     streamed aborts the response: http.ErrAbortHandler).
type transport interface {
	name() string
	// open readies the transport's state of one request in p, close
	// releases it; both once per request, around every attempt.
	open(p *prepared)
	close(p *prepared)
	// keeps reports that the transport sends a body it can keep whole
	// (up to fastBodyCap) from memory even without retries (the fast
	// path does: fasthttp writes a known body in one piece).
	keeps() bool
	// bodyBuf lends n bytes to keep the request's body in until close.
	bodyBuf(p *prepared, n int) []byte
	send(p *prepared) (code int, err error)
}

// prepared is one request as the attempts loop hands it to a transport:
// the request, its deadline, the kept body and the target of the attempt
// in progress. It lives in the pooled exchange, so passing it costs
// nothing.
type prepared struct {
	rt       *route
	ex       *exchange
	r        *http.Request
	deadline time.Time // the route timeout, over every attempt
	target   int       // index into the upstream's targets
	// body is the request's body kept in memory (bodyBuf) to be sent, and
	// sent again; nil: none, or streamed from r.Body.
	body []byte
	next int // the target mayDrop chose for the next attempt

	// The transports' own state of the request.
	fc     *fastCall     // fast: the pooled request and response
	req    *http.Request // standard: r bound to the deadline
	cancel func()        // standard: releases req's context
	// handshake (standard, an upgrade): the route deadline, which bounds
	// the handshake only; stopped at the upstream's 101.
	handshake *time.Timer
	mark      *sentMark // standard: whether the attempt's head was written

	// sent: an attempt's request reached the upstream (at least its head
	// was written, or may have been), so a client that then left had its
	// request judged there.
	sent bool
}

// mayDrop is a transport's question when the attempt in progress was
// answered code (502, 503 or 504): true when the request is sent again,
// so the answer is to be discarded. The retry is taken then (the attempt
// settled, the next target chosen, the budget spent): the answer reaches
// the client whenever it is not.
func (p *prepared) mayDrop(code int) bool {
	ex := p.ex
	if ex.bodyFailed() || ex.clientCtx.Err() != nil || p.expired() {
		return false
	}
	p.next = p.rt.retry(ex, p.r.Method, failStatus, code)
	return p.next >= 0
}

// expired reports that the route timeout has passed: nothing can be sent
// any more, so a failed attempt is not retried (a retry would fail at
// once, yet count as a retry and charge a target that never saw the
// request with a failure), and a failure answer reaches the client as the
// target sent it rather than the gateway's 504.
func (p *prepared) expired() bool { return !time.Now().Before(p.deadline) }

// errDropped is send's report of a failure answer discarded for a retry.
var errDropped = errors.New("proxy: answer dropped, the request is sent to another target")

// attempts forwards one request over tr: the whole exchange, retries
// included, is bounded by the route timeout, and the client going away
// ends it. It keeps a body it may send again (length known, at most
// fastBodyCap, not awaiting 100-continue) when the upstream retries or
// the transport keeps bodies anyway; chooses each attempt's target (the
// upstream package: balancing, retries beyond the targets, the retry
// budget) and settles every attempt it replaces (route.retry; the last is
// settled by route.settle when the request ends); and decides what is
// retried (retryable), failure answers included (prepared.mayDrop). A failure not retried is answered by
// upstreamFailed: 502/504, 400/408 for the client's own body, nothing to
// a client that left.
func (rt *route) attempts(ex *exchange, r *http.Request, tr transport, log zerolog.Logger) {
	up := rt.upstream
	p := &ex.out
	p.rt, p.ex, p.r, p.deadline, p.sent = rt, ex, r, time.Now().Add(up.timeout), false
	tr.open(p)
	defer tr.close(p)

	n := r.ContentLength
	kept := n == 0 || r.Body == nil || r.Body == http.NoBody
	if !kept && n > 0 && n <= fastBodyCap && len(r.Header["Expect"]) == 0 && (up.retries > 0 || tr.keeps()) {
		b := tr.bodyBuf(p, int(n))
		if _, err := io.ReadFull(r.Body, b); err != nil {
			upstreamFailed(ex, r, err, log)
			return
		}
		p.body, kept = b, true
	}
	ex.try.kept = kept

	for i := up.first(ex); ; {
		p.target = i
		code, err := tr.send(p)
		switch {
		case err == nil:
			return
		case err == errDropped:
			i = p.next
			continue
		case code != 0: // the answer broke before it reached the client
			upstreamFailed(ex, r, err, log)
			return
		}
		if ex.body != nil && p.expired() && isTimeout(err) {
			ex.body.stalledByClient(time.Now()) // then upstreamFailed answers 408
		}
		if !ex.bodyFailed() && ex.clientCtx.Err() == nil && !p.expired() {
			if i = rt.retry(ex, r.Method, classify(err), 0); i >= 0 {
				continue
			}
		}
		upstreamFailed(ex, r, err, log)
		return
	}
}
