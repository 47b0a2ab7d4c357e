package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http/httpguts"

	ups "sluice/upstream"
)

// standardForwarder is the standard path's transport, on
// httputil.ReverseProxy: it carries everything, including upgrades,
// streams and trailers. The attempts loop (route.attempts) owns the
// policy; ReverseProxy's hooks only apply the prepared attempt (Rewrite:
// the outgoing request as outgoing.go writes it), ask the loop whether a
// 502/503/504 answer is to be dropped for a retry (ModifyResponse:
// prepared.mayDrop), and hand errors back to it (ErrorHandler). They reach
// the attempt through a pooled stdCall, which holds a ReverseProxy of its
// own, so nothing is allocated for that.
type standardForwarder struct {
	rt        *route
	transport http.RoundTripper
	calls     *stdCalls
	log       zerolog.Logger
	// idle closes the transport's idle connections, before a replay
	// (sentMark); nil when the transport cannot (a test's).
	idle func()
}

func (f *standardForwarder) name() string { return "standard" }

// h1 says the transport speaks HTTP/1.1, whose replays sentMark bounds:
// HTTP/2's pool asks for a connection (GetConn) holding its own lock,
// which CloseIdleConnections takes, and sends a request again only on
// a connection that refused it unprocessed (GOAWAY, REFUSED_STREAM).
func newStandardForwarder(rt *route, transport http.RoundTripper, h1 bool, calls *stdCalls, log zerolog.Logger) *standardForwarder {
	f := &standardForwarder{rt: rt, transport: unspacing{transport}, calls: calls, log: log}
	if t, ok := transport.(interface{ CloseIdleConnections() }); ok && h1 {
		f.idle = t.CloseIdleConnections
	}
	return f
}

// tunnelLinger is how long a tunnel's client may keep its side open once
// the upstream has closed its own: it has been told (a half-close) and
// has what the upstream sent.
const tunnelLinger = time.Second

// tunnelEnd is the upstream's side of an upgraded connection, as
// ReverseProxy copies it to the client. When the upstream closes it (a
// WebSocket server ends the TCP connection first, RFC 6455 §7.1.1),
// ReverseProxy half-closes the client's side and waits for the client to
// close too, holding the call, and every slot it took, for as long as the
// client likes: the client is given tunnelLinger, after which its reads
// fail and the tunnel ends, as nginx ends an upgraded connection when
// either side closes. Allocated per upgrade, not pooled: ReverseProxy may
// read it after the exchange has been recycled.
type tunnelEnd struct {
	io.ReadWriteCloser
	client atomic.Pointer[net.Conn] // set by exchange.Hijack
	ended  atomic.Bool
	set    *tunnels // where it is open while the client's side is hijacked
	// idle closes the tunnel once no byte went either way for this long
	// (server.tunnelIdleTimeout): last is when one last did (monoNow),
	// checked by timer.
	idle  time.Duration
	last  atomic.Int64
	timer *time.Timer
}

// Write passes the client's bytes to the upstream, and notes them.
func (t *tunnelEnd) Write(p []byte) (int, error) {
	n, err := t.ReadWriteCloser.Write(p)
	if n > 0 {
		t.last.Store(monoNow())
	}
	return n, err
}

// watchIdle starts the idle check once the client's side is hijacked.
// Without it a WebSocket nobody used stayed open until a side closed it,
// each holding its resource's concurrency slot, two copy buffers (82 KB),
// four goroutines and two descriptors: 1,000 opened and left idle for
// 130 s were all still open (memory audit). Envoy closes one idle for 5
// minutes (stream_idle_timeout), nginx for 60 s (proxy_read_timeout).
func (t *tunnelEnd) watchIdle() {
	if t.idle <= 0 {
		return // a snapshot built without the server's defaults
	}
	t.last.Store(monoNow())
	// Made stopped, then started: checkIdle reads t.timer, which is set
	// before it can run.
	t.timer = time.AfterFunc(time.Hour, t.checkIdle)
	t.timer.Stop()
	t.timer.Reset(t.idle)
}

// checkIdle ends the tunnel if it has been idle for t.idle, else looks
// again when it would have been.
func (t *tunnelEnd) checkIdle() {
	quiet := time.Duration(monoNow() - t.last.Load())
	if quiet >= t.idle {
		t.end()
		return
	}
	t.timer.Reset(t.idle - quiet)
}

// stopIdle stops the idle check (the call ended).
func (t *tunnelEnd) stopIdle() {
	if t.timer != nil {
		t.timer.Stop()
	}
}

// end closes both sides of the tunnel (a drain past its deadline):
// ReverseProxy's copies fail and the call ends.
func (t *tunnelEnd) end() {
	if c := t.client.Load(); c != nil {
		_ = (*c).Close()
	}
	_ = t.ReadWriteCloser.Close()
}

func (t *tunnelEnd) Read(p []byte) (int, error) {
	n, err := t.ReadWriteCloser.Read(p)
	if n > 0 {
		t.last.Store(monoNow())
	}
	if err != nil && t.ended.CompareAndSwap(false, true) {
		if c := t.client.Load(); c != nil {
			_ = (*c).SetReadDeadline(time.Now().Add(tunnelLinger))
		}
	}
	return n, err
}

// unspacing mends the fields of an answer that its upstream wrote with
// white space before the colon ("X-Tokens-Used : 40", which net/http keeps
// under the name "X-Tokens-Used " and its writer then drops), as RFC 9112
// §5.1 asks of a proxy and as the fast path (fasthttp) reads them: both
// forwarders pass on the same fields, and a rule charges the same cost.
// It runs in the transport, before ReverseProxy removes the connection's
// own fields, so "Connection : X-Secret" is removed with X-Secret as on
// the fast path. A framing field so written (Content-Length,
// Transfer-Encoding) is a broken answer: net/http framed the body without
// it, so passing it on would tell the client another length (a 502, as
// fasthttp answers a second Content-Length).
type unspacing struct{ http.RoundTripper }

func (u unspacing) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := u.RoundTripper.RoundTrip(sentOnce(r))
	if err != nil || !hasSpacedName(resp.Header) {
		return resp, err
	}
	if err := unspaceNames(resp.Header); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// sentOnce keeps net/http's Transport from sending r again on a new
// connection when its reused one fails before an answer: the Transport
// takes a body-less request of any method that carries an Idempotency-Key
// or X-Idempotency-Key field for idempotent (golang.org/issue/19943), and a
// POST or PATCH reached its target twice (the upstreams audit), where SPEC
// §9 sends a request of a method that is not idempotent once. The field
// still goes to the upstream, under its lower-case name, which the
// Transport's check (a canonical-key lookup) does not see; field names are
// case-insensitive (RFC 9110 §5.1). So both forwarders replay the same
// requests, the body-less GET, HEAD, OPTIONS and TRACE (a PUT or DELETE is
// sent again by the attempts loop, as a counted retry).
func sentOnce(r *http.Request) *http.Request {
	if replayedMethod(r.Method) {
		return r
	}
	_, a := r.Header["Idempotency-Key"]
	_, b := r.Header["X-Idempotency-Key"]
	if !a && !b {
		return r
	}
	c := *r
	c.Header = r.Header.Clone()
	for _, k := range [...]string{"Idempotency-Key", "X-Idempotency-Key"} {
		if v, ok := c.Header[k]; ok {
			delete(c.Header, k)
			c.Header[strings.ToLower(k)] = v
		}
	}
	return &c
}

// errSpacedFraming: an answer's Content-Length or Transfer-Encoding came
// with white space before its colon.
var errSpacedFraming = errors.New("proxy: upstream answer's framing field written with white space before the colon")

// hasSpacedName reports a field name ending in white space.
func hasSpacedName(h http.Header) bool {
	for k := range h {
		if k != "" && k[len(k)-1] == ' ' {
			return true
		}
	}
	return false
}

func (f *standardForwarder) forward(ex *exchange, r *http.Request) { f.rt.attempts(ex, r, f, f.log) }

// open binds the request to the route deadline; the client going away
// cancels the upstream call through its context. The request's URL is
// made the view, whence ReverseProxy's clone takes it: RawPath is the
// view's path, RawQuery its query; a client's userinfo (absolute-form) is
// not turned into an Authorization header.
func (f *standardForwarder) open(p *prepared) {
	r, v := p.r, &p.ex.view
	u := r.URL
	u.Opaque, u.User, u.Path, u.RawPath = "", nil, unescapedPath(v.path), v.path
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = v.query, false, "", ""
	p.handshake = nil
	if asksUpgrade(r) {
		// ReverseProxy ends the tunnel when the request's context ends, so
		// a deadline on it would cut every WebSocket at the route timeout,
		// messages flowing or not. The deadline bounds the handshake, as
		// in Envoy and nginx, and stops at the 101 (modifyResponse); a
		// timer that fires first cancels the call as the deadline would,
		// with DeadlineExceeded as its cause (a 504).
		ctx, cancel := context.WithCancelCause(r.Context())
		t := time.AfterFunc(time.Until(p.deadline), func() { cancel(context.DeadlineExceeded) })
		p.req, p.handshake, p.mark = r.WithContext(ctx), t, nil
		p.cancel = func() { t.Stop(); cancel(context.Canceled) }
		return
	}
	ctx, cancel := context.WithDeadline(r.Context(), p.deadline)
	p.mark = nil
	replays := f.idle != nil && (r.Body == nil || r.Body == http.NoBody) && replayedMethod(r.Method)
	if p.ex.call.failures || replays {
		m := &sentMark{idle: f.idle}
		if p.ex.call.failures {
			m.trace.WroteHeaders = func() { m.sent.Store(true) }
		}
		if replays {
			m.trace.GetConn = m.getConn
		}
		ctx, p.mark = httptrace.WithClientTrace(ctx, &m.trace), m
	}
	p.req, p.cancel = r.WithContext(ctx), cancel
}

// replayedMethod reports a method net/http's Transport sends again, body-less,
// when its reused connection is closed under it before an answer.
func replayedMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// sentMark follows an attempt through net/http's Transport:
//   - whether its request head was written to a connection (httptrace's
//     WroteHeaders): a client that leaves before the answer is charged by a
//     countOn failure rule for a guess the upstream got, not for one stuck
//     in a dial (route.forward). Only such a rule's calls note it
//     (call.failures).
//   - each connection it asks for (GetConn): the Transport sends a
//     body-less GET, HEAD, OPTIONS or TRACE again, unbounded, while the
//     reused connection it took is closed under it unanswered, the race
//     of an upstream's keep-alive timeout; a target that drops the request
//     (one that kills its worker) saw it once per pooled connection, 33
//     times for one request, none counted as a retry (the upstreams
//     audit). From the second ask on, the idle connections are closed
//     first, so the replay dials: sent twice, as on the fast path. A third
//     send needs another request to give back a connection within the
//     microseconds between.
//
// It costs 3 allocations, for such calls only. Its own allocation: the
// Transport may call the hooks after the attempt returned, when the
// exchange serves another request.
type sentMark struct {
	sent  atomic.Bool
	gets  atomic.Int32 // GetConn calls of the attempt (send resets it)
	idle  func()       // the Transport's CloseIdleConnections
	trace httptrace.ClientTrace
}

func (m *sentMark) getConn(string) {
	if m.gets.Add(1) > 1 {
		m.idle()
	}
}

func (f *standardForwarder) close(p *prepared) { p.cancel() }
func (f *standardForwarder) keeps() bool       { return false }

// bodyBuf allocates: net/http's Transport may still read a body after
// the handler returned, so it cannot be pooled.
func (f *standardForwarder) bodyBuf(_ *prepared, n int) []byte { return make([]byte, n) }

// send serves p's attempt through a pooled ReverseProxy bound to p.
func (f *standardForwarder) send(p *prepared) (int, error) {
	if p.body != nil {
		p.req.Body = io.NopCloser(bytes.NewReader(p.body))
	}
	if p.mark != nil {
		p.mark.gets.Store(0)
	}
	c := f.calls.get()
	c.p, c.rp.Transport = p, f.transport
	c.holdHeader()
	c.rp.ServeHTTP(p.ex, p.req)
	c.restoreHeader() // none came (a failure): the gateway's answer has them
	err, broke := c.err, c.broke
	f.calls.put(c)
	p.sent = p.sent || err == nil || broke != 0 || p.mark != nil && p.mark.sent.Load()
	if err == nil {
		return p.ex.status, nil
	}
	if rs, ok := err.(*retryStatusError); ok {
		return rs.code, errDropped
	}
	if broke != 0 {
		return broke, err // answered in part: not sent again
	}
	return p.ex.status, err
}

// retryStatusError fails an attempt answered 502, 503 or 504 that is to be
// sent again.
type retryStatusError struct{ code int }

func (e *retryStatusError) Error() string {
	return "proxy: upstream answered " + strconv.Itoa(e.code) + "; retrying"
}

var retryStatuses = [...]*retryStatusError{{502}, {503}, {504}}

// stdCall is one standard attempt's ReverseProxy, whose hooks reach the
// attempt (p) and leave ReverseProxy's error (err) for send. Pooled
// gateway-wide: its hooks take everything from p.
type stdCall struct {
	rp  httputil.ReverseProxy
	p   *prepared
	err error
	// whole: the body readWhole read; broke: the status of an answer
	// whose body broke there, before anything was written.
	whole wholeBody
	broke int
	// held: the fields the gateway set on the answer before forwarding
	// (the RateLimit fields of a pass), kept out of the header map while
	// ReverseProxy runs: it writes that map with a 1xx (103 Early Hints)
	// and then clears it, so the final answer would lose them.
	held http.Header
}

// holdHeader moves the answer's fields set so far into c.held.
func (c *stdCall) holdHeader() {
	h := c.p.ex.Header()
	if len(h) == 0 || c.p.ex.status != 0 {
		return
	}
	if c.held == nil {
		c.held = make(http.Header, len(h))
	}
	for k, v := range h {
		c.held[k] = v
		delete(h, k)
	}
}

// restoreHeader puts the held fields back into the answer's header map,
// before the upstream's final answer is copied into it (modifyResponse)
// or the gateway writes its own.
func (c *stdCall) restoreHeader() {
	if len(c.held) == 0 {
		return
	}
	h := c.p.ex.Header()
	for k, v := range c.held {
		h[k] = append(v, h[k]...)
	}
	clear(c.held)
}

// stdCalls pools the stdCalls. Safe for concurrent use.
type stdCalls struct {
	p           sync.Pool
	copyBuffers *bufferPool
	// wholeBuffers are readWhole's, of copyBufSize bytes.
	wholeBuffers bufferPool
	errorLog     *stdlog.Logger
}

func newStdCalls(copyBuffers *bufferPool, log zerolog.Logger) *stdCalls {
	return &stdCalls{copyBuffers: copyBuffers, wholeBuffers: bufferPool{size: copyBufSize}, errorLog: stdlog.New(debugWriter{log}, "", 0)}
}

func (s *stdCalls) get() *stdCall {
	if c, ok := s.p.Get().(*stdCall); ok {
		return c
	}
	c := &stdCall{}
	c.whole.pool = &s.wholeBuffers
	c.rp = httputil.ReverseProxy{
		Rewrite:        c.rewrite,
		ModifyResponse: c.modifyResponse,
		ErrorHandler:   func(_ http.ResponseWriter, _ *http.Request, err error) { c.err = err },
		ErrorLog:       s.errorLog,
		BufferPool:     s.copyBuffers,
	}
	return c
}

func (s *stdCalls) put(c *stdCall) {
	c.p, c.err, c.rp.Transport, c.broke = nil, nil, nil, 0
	_ = c.whole.Close() // ReverseProxy has; in case it did not
	clear(c.held)
	s.p.Put(c)
}

// rewrite applies the prepared attempt to ReverseProxy's outgoing request
// (which it made from p.req, the view, with the hop-by-hop headers,
// Forwarded and X-Forwarded-For, -Host and -Proto removed): the other
// X-Forwarded-* of a peer that is not trusted and the CGI twins of the
// dropped headers removed, the request-target and X-Forwarded-* as
// outgoing.go writes them, and the origin header stripped.
func (c *stdCall) rewrite(pr *httputil.ProxyRequest) {
	p := c.p
	rt := p.rt
	target := rt.upstream.targets[p.target]
	out := pr.Out.URL // a copy of the view (open)
	if rt.stripPrefix != "" || target.Path != "" || target.RawPath != "" || target.RawQuery != "" {
		b, n := appendUpstreamTarget(nil, target, &p.ex.view, rt.stripPrefix)
		out.RawPath, out.RawQuery = string(b[:n]), ""
		if n < len(b) {
			out.RawQuery = string(b[n+1:])
		}
		out.Path = unescapedPath(out.RawPath)
	}
	out.Scheme, out.Host = target.Scheme, target.Host
	pr.Out.Host = ""
	// A request's trailers are not forwarded: the limits read its head,
	// and an upstream that merges trailers into the fields (Go's server
	// hands them to handlers in the same form) would read one no limit saw.
	// net/http sent a Trailer field naming them from the copy's keys, and
	// then none.
	pr.Out.Trailer = nil
	h := pr.Out.Header
	for k := range h {
		// ReverseProxy removed what dropRequestHeader and Connection name.
		if !rt.snap.sources.keyedOn(p.r, k, connNames{}) || rt.strippedTwin(k) {
			delete(h, k)
		}
	}
	if chain, ip, ok := rt.snap.sources.forwardedFor(p.r); ok {
		if len(chain) > 0 {
			ip = strings.Join(chain, ", ") + ", " + ip
		}
		h["X-Forwarded-For"] = []string{ip}
	}
	h["X-Forwarded-Host"] = []string{p.r.Host}
	h["X-Forwarded-Proto"] = []string{rt.snap.sources.forwardedProto(p.r)}
	if rt.stripOrigin != "" {
		delete(h, rt.stripOrigin)
	}
}

// modifyResponse refuses a final status a client may not be sent
// (validStatus; below 100 net/http would panic in WriteHeader, and the
// client see a cut connection: an upstream failure, answered 502), drops a
// trailer field no trailer may hold (dropForbiddenTrailers), and drops a
// 502/503/504 answer that the attempts loop sends again.
func (c *stdCall) modifyResponse(resp *http.Response) error {
	dropLegacy(resp.Header, c.held)
	c.restoreHeader()
	code := resp.StatusCode
	if !validStatus(code) && code != http.StatusSwitchingProtocols {
		return fmt.Errorf("%w %d", errBadStatus, code)
	}
	if code == http.StatusSwitchingProtocols {
		if resp.Request != nil && !webSocketAccepted(resp.Request, resp) {
			return errBadUpgrade
		}
		if c.p.handshake != nil {
			c.p.handshake.Stop() // the tunnel outlives the route timeout
		}
		// ReverseProxy writes a 101 to the hijacked connection itself,
		// never through the exchange's WriteHeader: the rules that take a
		// cost from the answer read this one here, and its cost headers
		// go before ReverseProxy copies the rest to the client. Only for
		// a request that asked to upgrade (handshake): a 101 to any other
		// is ReverseProxy's error (502), and the attempt's, not an answer.
		if ex := c.p.ex; c.p.handshake != nil && ex.status == 0 && !ex.failed {
			if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
				ex.tunnel = &tunnelEnd{ReadWriteCloser: rwc, set: c.p.rt.snap.tunnels, idle: c.p.rt.snap.tunnelIdle}
				resp.Body = ex.tunnel
			}
			ex.call.answer(resp.Header)
			// Answered: the call ends as a forwarded one (Exit, the cost
			// charged), not as one whose client left before any answer.
			ex.status, ex.switched = code, c.p.rt.snap.clock.Now()
			ex.call.answered(ex.switched)
		}
	}
	if ups.FailureStatus(code) && c.p.mayDrop(code) {
		return retryStatuses[code-502]
	}
	if code/100 == 2 && resp.ContentLength < 0 && isEventStream([]byte(resp.Header.Get("Content-Type"))) {
		c.p.ex.call.answered(c.p.rt.snap.clock.Now())
	}
	if n := resp.ContentLength; n > 0 && n <= copyBufSize && resp.Body != http.NoBody && c.p.req.Method != http.MethodHead {
		if err := c.readWhole(resp, int(n)); err != nil {
			c.broke = code
			return err
		}
	}
	if (resp.ContentLength < 0 || resp.ProtoMajor >= 2) && resp.Body != http.NoBody && code != http.StatusSwitchingProtocols {
		// Trailers come with a chunked body, or any over HTTP/2 (a
		// content-length too): those announced are in resp.Trailer now,
		// ReverseProxy announces them from it, and those not announced
		// are added to it at the end.
		dropForbiddenTrailers(resp.Trailer)
		resp.Body = &trailerGuard{ReadCloser: resp.Body, resp: resp}
	}
	return nil
}

// trailerGuard drops, once the body has ended, the trailer fields an
// upstream may not send as trailers: net/http's transport reads them into
// resp.Trailer at the body's end, and ReverseProxy passes them all on.
type trailerGuard struct {
	io.ReadCloser
	resp *http.Response
}

func (g *trailerGuard) Read(p []byte) (int, error) {
	n, err := g.ReadCloser.Read(p)
	if err == io.EOF {
		dropForbiddenTrailers(g.resp.Trailer)
	}
	return n, err
}

// dropForbiddenTrailers removes from trailers the fields RFC 9110 §6.5.1
// keeps out of a trailer section (framing, routing, authentication,
// response control: httpguts.ValidTrailerHeader's list) and Set-Cookie:
// the standard path passed "Connection", "Content-Length" and "Set-Cookie"
// in an answer's trailers to the client, where the fast path's fasthttp
// refuses such an answer (upstream audit).
func dropForbiddenTrailers(trailers http.Header) {
	for k := range trailers {
		if !httpguts.ValidTrailerHeader(k) || k == "Set-Cookie" {
			delete(trailers, k)
		}
	}
}

// unspaceNames moves the fields of h written with white space before the
// colon to their name (see unspacing).
func unspaceNames(h http.Header) error {
	for k, vv := range h {
		if k == "" || k[len(k)-1] != ' ' {
			continue
		}
		delete(h, k)
		if name := strings.TrimRight(k, " "); httpguts.ValidHeaderFieldName(name) {
			name = http.CanonicalHeaderKey(name)
			if name == "Content-Length" || name == "Transfer-Encoding" {
				return errSpacedFraming
			}
			h[name] = append(h[name], vv...)
		}
	}
	return nil
}

// readWhole reads an answer's body of n bytes (up to copyBufSize) before
// its status goes out, as the fast path does (fastForwarder.writeResponse):
// a body that breaks then has sent the client nothing, and the client gets
// the gateway's 502 where net/http, the status already in its buffer,
// would cut the connection with no answer at all (an empty reply). The body
// is read to its end, so its connection goes back to the pool before the
// client is written to.
func (c *stdCall) readWhole(resp *http.Response, n int) error {
	bp := c.whole.pool.take()
	buf := *bp
	if _, err := io.ReadFull(resp.Body, buf[:n]); err != nil {
		c.whole.pool.give(bp)
		return err
	}
	_, _ = resp.Body.Read(c.whole.end[:]) // io.EOF: the Transport reuses the connection
	_ = resp.Body.Close()
	c.whole.buf = bp
	c.whole.r.Reset(buf[:n])
	resp.Body = &c.whole
	return nil
}

// wholeBody is an answer's body readWhole read; Close gives its buffer
// back (ReverseProxy closes the body once it has copied it).
type wholeBody struct {
	r    bytes.Reader
	buf  *[]byte
	pool *bufferPool
	end  [1]byte // the read that meets the end, not escaping to the heap
}

func (b *wholeBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *wholeBody) Close() error {
	if b.buf != nil {
		b.pool.give(b.buf)
		b.buf = nil
	}
	return nil
}

// bufferPool lends buffers of size bytes (0: 32 KiB, ReverseProxy's own
// copy buffer size): ReverseProxy's copy buffers (without it each request
// allocates one), and readWhole's. Safe for concurrent use.
type bufferPool struct {
	p    sync.Pool
	size int
}

func (b *bufferPool) Get() []byte { return *b.take() }

// take and give lend a buffer by its pointer, which Put, taking a slice,
// allocates anew each time.
func (b *bufferPool) take() *[]byte {
	if p, ok := b.p.Get().(*[]byte); ok {
		return p
	}
	buf := make([]byte, max(b.size, 32<<10))
	return &buf
}

func (b *bufferPool) give(p *[]byte) { b.p.Put(p) }

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// debugWriter sends ReverseProxy's own log lines (a body copy that broke)
// to the gateway's log at debug level instead of the process's stderr.
type debugWriter struct{ log zerolog.Logger }

func (w debugWriter) Write(p []byte) (int, error) {
	w.log.Debug().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}

// upstreamFailed answers a transport failure: 504 when the route timeout
// expired, 502 otherwise (a dial past connectTimeout included), nothing when the client itself went away. A
// failure to read the client's own body is the client's: 413 for a body
// over the route's maxBodyBytes, 408 for a body that did not arrive in
// time, 400 otherwise, and no upstream error.
func upstreamFailed(w http.ResponseWriter, r *http.Request, err error, log zerolog.Logger) {
	ex, _ := w.(*exchange)
	if ex != nil {
		if ex.bodyFailed() {
			log.Debug().Err(err).Str("path", r.URL.Path).Msg("client body failed")
			// Answered even if the client seems gone: one that only
			// half-closed is still reading, and an answer costs nothing.
			ex.clientGone = ex.clientCtx.Err() != nil
			switch {
			case ex.body.tooLarge.Load():
				writeJSON(w, http.StatusRequestEntityTooLarge, bodyTooLarge)
			case ex.body.timedOut.Load():
				writeJSON(w, http.StatusRequestTimeout, bodyClientTimeout)
			default:
				writeJSON(w, http.StatusBadRequest, bodyBadBody)
			}
			return
		}
		ex.failed = true
		if ex.clientCtx.Err() != nil {
			ex.clientGone = true
			return
		}
	}
	timedOut := isTimeout(err)
	if timedOut && ex != nil && classify(err) == failConnect && time.Now().Before(ex.out.deadline) {
		// connectTimeout passed, not the route's timeout: the target
		// could not be reached (a dial the route's deadline cut is 504).
		timedOut = false
	}
	if timedOut {
		log.Debug().Err(err).Str("path", r.URL.Path).Msg("upstream timeout")
		writeJSON(w, http.StatusGatewayTimeout, bodyTimeout)
		return
	}
	if errors.Is(err, errBadUpgrade) {
		// The upstream answered, but with a 101 no WebSocket server sends:
		// not "unreachable". At debug, as every upstream failure here: a
		// client could send such handshakes without end.
		log.Debug().Str("path", r.URL.Path).Msg("upstream answered a WebSocket handshake 101 without its Sec-WebSocket-Accept; answered 502, no tunnel opened")
		writeJSON(w, http.StatusBadGateway, bodyBadUpgrade)
		return
	}
	log.Debug().Err(err).Str("path", r.URL.Path).Msg("upstream unreachable")
	writeJSON(w, http.StatusBadGateway, bodyBadGateway)
}

// isTimeout covers both clients: net/http's context and net.Error
// timeouts, fasthttp's ErrTimeout (which has Timeout but is no net.Error)
// and its dial timeout.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, fasthttp.ErrDialTimeout) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return ne.Timeout()
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
