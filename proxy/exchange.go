package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"iter"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"sluice/config"
)

// exchange wraps the client's ResponseWriter for one request: it records the
// status the client got and whether the upstream failed, so the statistics
// (errors, RT) and the circuit breakers see what the client saw. Pooled:
// its lifetime ends when the route handler returns.
type exchange struct {
	http.ResponseWriter
	req        *http.Request
	view       view // the request's one reading (readTarget)
	src        *sources
	params     *chi.Context // the path parameters; nil: none
	clientCtx  context.Context
	status     int
	failed     bool // transport failure or timeout
	clientGone bool
	// writeFailed: a write to the client failed, so it is gone even if
	// its context has not been cancelled yet (the server's reader may not
	// have seen the closed connection).
	writeFailed bool
	// late: the upstream's answer came after its client had left (the
	// fast path cannot cancel its call and waits for it): a breaker takes
	// it for a call abandoned, as the standard path's cancelled call is.
	late bool
	body *clientBody // the request body as forwarded; nil: none
	// tunnel is the upstream's side of an upgrade the standard path let
	// through (nil: none); Hijack hands it the client's connection.
	tunnel *tunnelEnd
	call   call     // what the route's guards know and hold of the request
	try    tries    // the targets it was sent to
	out    prepared // the request as the attempts loop sends it
	// vals holds the values of the source read last (Values, one).
	vals valueSet
	// key joins the values of a composite key (Values); its buffer is
	// kept across the exchange's uses.
	key joined
	// tooMany: a source read by Values had more than maxValues values,
	// so the request is answered 400.
	tooMany bool
	// guard bounds each write of an HTTP/2 response by sendTimeout; nil
	// over HTTP/1.1, where the connection bounds them (send.go).
	guard *sendGuard
	// interim counts the 1xx answers written (the standard path relays an
	// upstream's); past maxInterim they are dropped.
	interim uint8
	// netLength: the answer's Content-Length is left to net/http
	// (fastForwarder.writeResponse), and WriteHeader removes the
	// upstream's once the rules that count after the answer have read it.
	netLength bool
	// clock, when a breaker will judge the exchange (route.timeWrites),
	// times each write and flush to the client; clientWait sums them. A
	// breaker judges the upstream, and a client reading a large answer
	// slowly would otherwise make a healthy upstream look slow, and open
	// the breaker for every client.
	clock      Clock
	clientWait int64
	// switched is when the upstream's 101 came (0: none): an upgrade's
	// response time ends there, and the tunnel's lifetime is no latency.
	switched int64
}

// clientBody wraps a request body (Gateway.ServeHTTP, once per request with
// a body) to tell a client's broken, abandoned or too slow upload (the
// client's fault) from an upstream failure, and to see whether it was read
// to its end. It is its own allocation, not part of the pooled exchange,
// because ReverseProxy's Transport may still read it after the handler
// returned.
type clientBody struct {
	rc       io.ReadCloser
	rw       http.ResponseWriter
	failed   atomic.Bool
	timedOut atomic.Bool
	eof      atomic.Bool
	read     atomic.Bool // a Read was made: the body cannot be sent again whole unless kept
	// closed: the gateway's side closed the body (the Transport does once
	// an answer came, or its connection broke); a Read that fails after it
	// says nothing of the client, whose body may have all arrived: the
	// Transport's last Read, which looks for the end, can come later.
	// net/http's HTTP/1 server closes it too, under this wrapper, when the
	// answer's head is written (after reading the rest, up to 256 KiB):
	// the Read then fails with http.ErrBodyReadAfterClose.
	closed atomic.Bool
	// tooLarge: the body passed limit (the route's maxBodyBytes); the read
	// that found it failed with errBodyTooLarge, and the reader got at most
	// limit bytes in all. Also set, unread, when its Content-Length was
	// over the cap (route.tooLarge): either way the answer is a 413.
	tooLarge atomic.Bool
	// limit caps the body (0: none) and got counts what was read; both
	// are set and read by the one reader of the body.
	limit, got int64
	// reading: a Read of the client's body is in progress; readAt is when
	// the last one returned (monoNow). They tell, when the route timeout
	// ends a streamed upload, whether the gateway was stuck on the
	// upstream (stalledByClient).
	reading atomic.Bool
	readAt  atomic.Int64
	// length is the declared length (the request's Content-Length; -1:
	// none), left the bytes not yet read; end takes the Read that looks
	// past it. Both are the one reader's.
	length int64
	end    [1]byte
	// A body must come at minBodyRate after its first bodyGrace from its
	// first read (start): its read deadline is start + bodyGrace +
	// total/minBodyRate (monoNow), at most routeEnd, the route timeout's
	// (0: no pace, a gRPC call's); due is the deadline set last. All the
	// one reader's.
	start, routeEnd, due, total int64
}

// minBodyRate and bodyGrace are the pace a request body must keep, on
// average from its start, once bodyGrace has passed: Kestrel's defaults.
// The route timeout (30 s by default) alone let a client that sent a byte a
// second hold the slots its request took (a concurrency rule's, a queue's)
// and, streamed, an upstream connection, for all of it: five such clients
// kept a route of five refusing everyone else for 30 s. A body under the
// pace gets 408 as one the route timeout ends.
const (
	minBodyRate = 240 // bytes per second
	bodyGrace   = 5 * time.Second
)

// startPace starts the body's pace at its first read: the gateway reads
// a streamed body only once it has a connection to the upstream, and the
// dial, a retry on another target or a wait for a pooled connection must
// not spend the client's grace.
func (b *clientBody) startPace() {
	b.start = monoNow()
	b.due = min(b.start+int64(bodyGrace), b.routeEnd)
	_ = http.NewResponseController(b.rw).SetReadDeadline(monoTime(b.due))
}

// paced moves the body's read deadline on after n more bytes came, by the
// pace minBodyRate asks, never past the route timeout. A move under 50 ms
// is left for the next, so that a body in small reads does not set a
// deadline at each.
func (b *clientBody) paced(n int) {
	b.total += int64(n)
	due := min(b.start+int64(bodyGrace)+b.total*int64(time.Second)/minBodyRate, b.routeEnd)
	if due-b.due < int64(50*time.Millisecond) {
		return
	}
	b.due = due
	_ = http.NewResponseController(b.rw).SetReadDeadline(monoTime(due))
}

// clientStall is how long the gateway must have been kept from reading the
// client's body, by a write to the upstream that does not finish, for a
// route timeout that ends the upload to be the upstream's: the pieces go
// to a healthy upstream in microseconds.
const clientStall = 100 * time.Millisecond

// stalledByClient is the verdict on a streamed upload whose exchange the
// route timeout ended before the whole body had arrived: unless the
// gateway was stuck writing to the upstream (no Read for clientStall), the
// body was still on its way from the client, and the upstream cannot be
// blamed for not answering a request it had not all been given: the client
// gets 408, and the body is marked failed as the Read that the client's own
// read deadline fails would mark it. The route deadline and that read
// deadline fall together, and a transport that saw its own first charged
// the target with a timeout: slow uploads (pieces every 10 ms, or every
// 1 ms) could eject it.
func (b *clientBody) stalledByClient(now time.Time) bool {
	if b.failed.Load() {
		return true
	}
	if b.eof.Load() || !b.read.Load() {
		return false
	}
	if !b.reading.Load() && monoOf(now)-b.readAt.Load() > int64(clientStall) {
		return false
	}
	b.timedOut.Store(true)
	b.failed.Store(true)
	return true
}

// errBodyTooLarge fails the read that passes a route's maxBodyBytes.
var errBodyTooLarge = errors.New("proxy: request body over maxBodyBytes")

func (b *clientBody) Read(p []byte) (int, error) {
	if !b.read.Load() {
		b.read.Store(true)
	}
	if b.limit > 0 && int64(len(p)) > b.limit-b.got+1 {
		// One byte past the cap is enough to know it was passed.
		p = p[:b.limit-b.got+1]
	}
	if b.start == 0 && b.routeEnd != 0 {
		b.startPace()
	}
	b.reading.Store(true)
	n, err := b.rc.Read(p)
	if b.length > 0 && n > 0 && err == nil {
		if b.length -= int64(n); b.length <= 0 {
			n, err = b.ends(n)
		}
	}
	b.readAt.Store(monoNow())
	b.reading.Store(false)
	if n > 0 && err == nil && b.routeEnd != 0 {
		b.paced(n)
	}
	if b.limit > 0 {
		if b.got += int64(n); b.got > b.limit {
			n -= int(b.got - b.limit)
			b.got = b.limit
			b.tooLarge.Store(true)
			b.failed.Store(true)
			return n, errBodyTooLarge
		}
	}
	switch {
	case err == io.EOF:
		// The whole body is in: lift the deadline before net/http's
		// background read (which watches for the client leaving) runs
		// into it.
		if !b.eof.Swap(true) {
			_ = http.NewResponseController(b.rw).SetReadDeadline(time.Time{})
		}
	case err != nil && (b.closed.Load() || errors.Is(err, http.ErrBodyReadAfterClose)):
	case err != nil:
		b.timedOut.Store(isTimeout(err))
		b.failed.Store(true)
	}
	return n, err
}

// errPastLength fails the read that finds a body going on past its
// declared length.
var errPastLength = errors.New("proxy: request body past its Content-Length")

// ends is Read's last step once the declared length has been read, the
// last n bytes of it in hand: it reads on for the body's end, and hands
// the n bytes over only with it (n, io.EOF); else (0, the error), so that
// no forwarder sends the request whole. An h2 stream can go on past its
// content-length, which makes it malformed (RFC 9113 §8.1.1), and Go's h2
// server says so only when the DATA past it comes: the length's worth,
// come first, was forwarded whole, a request the client never sent, while
// its stream was reset. The end is at once where the last DATA frame ends
// the stream, and an HTTP/1 body is over at its length. (An h2 request
// declaring a length of 0 is waited for before it is routed: h2EmptyBody.)
func (b *clientBody) ends(n int) (int, error) {
	if err := bodyEnd(b.rc, b.end[:]); err != nil {
		return 0, err
	}
	return n, io.EOF
}

// bodyEnd reads r, a body whose declared length has been read, on for its
// end, into end (one byte): nil at the end, errPastLength when content
// comes instead (a byte past the length fails the body even if the end
// came with it), else the read's error. A read of nothing (allowed of a
// Reader) says neither, so it reads again. clientBody.ends and
// h2EmptyBody both ask it.
func bodyEnd(r io.Reader, end []byte) error {
	for {
		switch m, err := r.Read(end); {
		case m > 0:
			return errPastLength
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
}

// Close closes the client's body, except once the cap was passed: then
// net/http is left to drain what the client still sends (up to its 256
// KiB, within the read deadline) before it writes the 413, as nginx's
// lingering close does. A body closed unread makes net/http close the
// connection right after the answer, and a client still writing can meet
// the reset before it reads the 413.
func (b *clientBody) Close() error {
	if b.tooLarge.Load() {
		return nil
	}
	b.closed.Store(true)
	return b.rc.Close()
}

// watchBody bounds reading r's body (wrapped by Gateway.ServeHTTP) by the
// route timeout, on both forwarders: a client that dribbles its body cannot
// hold the request past it. The deadline stays if the body never
// completes, so that net/http's drain of the unread rest is bounded too.
// A body of unknown length is capped at limit (the route's maxBodyBytes,
// 0: none): the read that passes it fails, which aborts the upstream
// request, and the client is answered 413 (upstreamFailed). A known length
// over the cap never gets here (route.serve answers 413 first).
// Requests without a body cost nothing here (not even a clock read).
func (e *exchange) watchBody(r *http.Request, timeout time.Duration, limit int64, h2Upstream bool) {
	b := clientBodyOf(r)
	if b == nil {
		return
	}
	e.body = b
	b.limit = limit
	now := time.Now()
	if h2Upstream && grpcStream(r) {
		// A gRPC stream's messages come when the client has them (a
		// client-streaming call may be quiet for long): no pace, as
		// Kestrel lifts its own for gRPC. The route timeout bounds it.
		// Only a call that can be a stream has it: the content-type is
		// the client's word, and on a route to an HTTP/1.1 upstream it
		// bought any client the slow body the pace is there to cut.
		_ = http.NewResponseController(e).SetReadDeadline(now.Add(timeout))
		return
	}
	// Until the pace starts, at the body's first read, the route timeout.
	b.routeEnd = monoOf(now.Add(timeout))
	_ = http.NewResponseController(e).SetReadDeadline(monoTime(b.routeEnd))
}

// clientBodyOf returns r's body as Gateway.ServeHTTP wrapped it; nil: r
// came without a body.
func clientBodyOf(r *http.Request) *clientBody {
	b, _ := r.Body.(*clientBody)
	return b
}

// bodyFailed reports whether reading the client's body failed.
func (e *exchange) bodyFailed() bool { return e.body != nil && e.body.failed.Load() }

// bodyRead reports whether any of the client's body was read.
func (e *exchange) bodyRead() bool { return e.body != nil && e.body.read.Load() }

var _ interface{ Unwrap() http.ResponseWriter } = (*exchange)(nil)

// maxInterim is how many 1xx answers one request relays, as many as Go's
// transport reads before it refuses an answer when nobody relays them.
const maxInterim = 5

// WriteHeader is where both forwarders hand the client the upstream's
// final status and headers (and the gateway its own answers, after
// e.failed): the param rules that count after the answer read it there,
// and the headers they read are removed.
func (e *exchange) WriteHeader(code int) {
	final := e.status == 0 && code >= 200
	switch {
	case final:
		e.status = code
		e.late = !e.failed && e.clientCtx.Err() != nil
		h := e.Header()
		if !e.failed {
			e.call.answer(h)
		}
		if e.netLength {
			delete(h, "Content-Length")
		}
		if _, typed := h["Content-Type"]; !typed {
			// An answer the upstream left untyped stays untyped, as nginx
			// and Envoy pass it: net/http would guess a type from the
			// body, and an HTML body the upstream sent untyped with
			// "X-Content-Type-Options: nosniff" reached browsers as
			// text/html. A nil value is net/http's way to say none.
			h["Content-Type"] = nil
		}
	case code < 200:
		if e.interim == maxInterim {
			// An upstream that sends interim answers without end (the
			// transport sets no limit while ReverseProxy relays them)
			// had each relayed: 50 MB of 103s before one 200. Past
			// the limit they are read and dropped; the route timeout
			// bounds the wait for the final one.
			return
		}
		e.interim++
		e.call.strip(e.Header()) // an interim answer (103 Early Hints) keeps them too
	}
	e.ResponseWriter.WriteHeader(code)
	if h := e.Header(); final && len(h["Trailer"]) != 0 {
		dropAnnounced(h)
	}
}

// dropAnnounced removes from h, once its head is written (net/http keeps a
// copy of it then), the fields that h's Trailer announces. net/http sends
// as trailers whatever those keys hold when the handler returns, and the
// forwarders add the upstream's trailer values to them: a field the
// upstream sent in its head and again as a trailer went out in the
// trailers with its head value as well ("head, tail"; the fast path said
// "head, tail, head").
func dropAnnounced(h http.Header) {
	for name := range listTokens(h["Trailer"]) {
		delete(h, http.CanonicalHeaderKey(name))
	}
}

// listTokens yields the elements of a list field's lines (Trailer,
// Upgrade), trimmed as net/http trims them; empty elements are skipped.
// The one reading of a Trailer field (dropAnnounced, unannounce) and of an
// Upgrade field (keepUpgrades).
func listTokens(lines []string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, l := range lines {
			for name := range strings.SplitSeq(l, ",") {
				if n := textproto.TrimString(name); n != "" && !yield(n) {
					return
				}
			}
		}
	}
}

func (e *exchange) Write(b []byte) (int, error) {
	if e.status == 0 {
		e.status = http.StatusOK
	}
	var (
		n   int
		err error
		t0  int64
	)
	if e.clock != nil {
		t0 = e.clock.Now()
	}
	if e.guard == nil {
		n, err = e.ResponseWriter.Write(b)
	} else {
		n, err = e.guard.write(e.ResponseWriter, b)
	}
	if e.clock != nil {
		e.clientWait += e.clock.Now() - t0
	}
	if err != nil {
		e.writeFailed = true
	}
	return n, err
}

// FlushError is Flush under the guard: an HTTP/2 flush waits for the
// client's window as a write does. http.ResponseController finds it.
func (e *exchange) FlushError() error {
	var t0 int64
	if e.clock != nil {
		t0 = e.clock.Now()
	}
	if e.guard != nil {
		e.guard.arm()
	}
	err := http.NewResponseController(e.ResponseWriter).Flush()
	if e.guard != nil {
		e.guard.disarm()
	}
	if e.clock != nil {
		e.clientWait += e.clock.Now() - t0
	}
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		e.writeFailed = true
	}
	return err
}

// Unwrap lets http.ResponseController reach Flush and Hijack (streaming,
// WebSocket upgrades) on the real writer.
func (e *exchange) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// Hijack hands an upgraded connection (WebSocket) over to ReverseProxy,
// which writes the upstream's 101 on it past WriteHeader: the exchange
// records the 101 here, so the upgrade counts as the answer it is (code
// 1xx in sluice_upstream_requests_total) and not as none (a transport
// failure).
func (e *exchange) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(e.ResponseWriter).Hijack()
	if err == nil && e.status == 0 {
		e.status = http.StatusSwitchingProtocols
	}
	if err == nil && e.tunnel != nil {
		e.tunnel.client.Store(&c)
		e.tunnel.set.add(e.tunnel) // until the call ends (route.forward)
		e.tunnel.watchIdle()
	}
	return c, rw, err
}

// Values implements hotparam.Values; an *exchange is a pointer, so passing
// it as an interface allocates nothing, and the values it returns are held
// in e.vals (a composite key's in e.key) until the next read.
func (e *exchange) Values(k config.Key) ([]string, bool) {
	if len(k) == 1 {
		if !e.src.values(e.req, &e.view, e.params, k[0], &e.vals) {
			e.tooMany = true
			return nil, false
		}
		return e.vals.list(), true
	}
	vals, ok := e.key.values(e, k)
	if !ok {
		e.tooMany = true
	}
	return vals, ok
}

// one reads a source that must give one value (origin.from, hashOn): v is
// its value, found false when the request has none, and ok false when it
// has several distinct ones (the request is answered 400).
func (e *exchange) one(src config.Source) (v string, found, ok bool) {
	e.vals.one = true
	e.src.values(e.req, &e.view, e.params, src, &e.vals)
	e.vals.one = false
	switch e.vals.n {
	case 0:
		return "", false, true
	case 1:
		return e.vals.v[0], true, true
	}
	return "", false, false
}

type exchangePool struct{ p sync.Pool }

func (p *exchangePool) get(w http.ResponseWriter, r *http.Request, v view, src *sources, params *chi.Context) *exchange {
	e, _ := p.p.Get().(*exchange)
	if e == nil {
		e = new(exchange)
	}
	// put left it zeroed but for its buffers: the exchange is 2.3 KB,
	// cleared once a request, not twice.
	e.ResponseWriter, e.req, e.view, e.src, e.params, e.clientCtx = w, r, v, src, params, r.Context()
	return e
}

// put zeroes e for its next get, keeping the room for API groups' calls
// and a prioritized call's pending tokens (emptied) and the composite keys'
// buffer.
func (p *exchangePool) put(e *exchange) {
	clear(e.call.groups)
	clear(e.call.pending)
	groups, pending := e.call.groups[:0], e.call.pending[:0]
	e.key.reset()
	key := e.key.buf
	*e = exchange{}
	e.call.groups, e.call.pending, e.key.buf = groups, pending, key
	p.p.Put(e)
}
