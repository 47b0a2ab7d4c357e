package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"unsafe"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	ups "sluice/upstream"
)

// fastForwarder is the fast path's transport: a fasthttp.HostClient per
// target (pooled keep-alive connections), pooled request/response objects,
// and a response copied to the client without the per-request allocations
// of httputil.ReverseProxy. The attempts loop (route.attempts) owns the
// policy and outgoing.go writes the request; what it keeps of
// ReverseProxy's semantics is the answer's side: hop-by-hop removal, 502/504
// with the same JSON bodies (through the loop), and streaming with a flush
// per read for responses of unknown length or text/event-stream.
type fastForwarder struct {
	rt   *route
	pool *fastCallPool
	log  zerolog.Logger
}

func (f *fastForwarder) name() string { return "fast" }

// fastCall is the pooled state of one fast exchange.
type fastCall struct {
	req  fasthttp.Request
	resp fasthttp.Response
	buf  []byte // request body, then the response copy buffer
	body []byte // the request body kept in buf; nil: none
	uri  []byte
	xff  []byte
	vals []byte // response header values, made into one string
	// fields and conn are the upstream's answer's fields to copy and its
	// Connection lines (copyResponseHeader).
	fields []upstreamField
	conn   []string // read-only views of fasthttp's buffer (readOnlyString)
	// names are the field names the last answer copied (fastCall.name).
	names []string
}

// copyBufSize is the response copy buffer; a response with a known length
// up to this size is read whole before anything is written, so it reaches
// the client in one write and its connection is back in the pool first.
// (64 KiB rather than 32 KiB measured ~15% less CPU per 64 KiB response.)
const copyBufSize = 64 << 10

type fastCallPool struct{ p sync.Pool }

func (p *fastCallPool) get() *fastCall {
	c, _ := p.p.Get().(*fastCall)
	if c == nil {
		c = &fastCall{buf: make([]byte, copyBufSize)}
	}
	return c
}

func (p *fastCallPool) put(c *fastCall) {
	_ = c.resp.CloseBodyStream()
	c.req.Reset()
	c.resp.Reset()
	c.body = nil
	if cap(c.buf) > fastBodyCap {
		c.buf = make([]byte, copyBufSize) // a forced-fast big body: do not pool it
	}
	p.p.Put(c)
}

var (
	errClientGone = errors.New("proxy: client went away")
	errBadStatus  = errors.New("proxy: upstream answered an invalid final status")
	errBadUpgrade = errors.New("proxy: upstream answered 101 without accepting the WebSocket handshake")
)

// validStatus reports a final status a client may be sent: RFC 9110 §15
// has 100 to 599. A 999 reached the client while the statistics counted
// it failed (>= 500), an upstream metric "error" and a breaker's "5xx" a
// success: an answer no reading agrees on is an upstream failure, as one
// below 200.
func validStatus(code int) bool { return code >= 200 && code <= 599 }

func (f *fastForwarder) forward(ex *exchange, r *http.Request) { f.rt.attempts(ex, r, f, f.log) }

func (f *fastForwarder) open(p *prepared)  { p.fc = f.pool.get() }
func (f *fastForwarder) close(p *prepared) { f.pool.put(p.fc) }
func (f *fastForwarder) keeps() bool       { return true }

// bodyBuf lends the pooled call's buffer, grown to n if needed.
func (f *fastForwarder) bodyBuf(p *prepared, n int) []byte {
	c := p.fc
	if cap(c.buf) < n {
		c.buf = make([]byte, max(n, copyBufSize))
	}
	c.body = c.buf[:n]
	return c.body
}

// send writes p's attempt to its target on the target's fasthttp client,
// within p's deadline, and copies the answer to the client
// (writeResponse).
func (f *fastForwarder) send(p *prepared) (int, error) {
	c := p.fc
	req, resp := &c.req, &c.resp
	t := f.rt.upstream.fast[p.target]
	f.buildRequest(c, t, p.r, &p.ex.view)
	f.setBody(c, p.r, p.ex.try.kept)
	resp.Header.SetNoDefaultContentType(true)
	err := t.hc.DoDeadline(req, resp, p.deadline)
	if err != nil && replayOnNewConn(req, resp, err) {
		// The pool's other connections went idle with the one the target
		// closed, and are closed too, so that the replay dials: a target
		// that drops this request on any connection sees it twice, not
		// once per pooled connection (up to 9 times, uncounted as
		// retries: a request that kills its worker killed 9).
		t.hc.CloseIdleConnections()
		err = t.hc.DoDeadline(req, resp, p.deadline)
	}
	if err != nil {
		req.Reset()
		// A dial that failed sent nothing; any other failure may have.
		p.sent = p.sent || classify(err) != failConnect
		return 0, err
	}
	p.sent = true
	if c := lastConn(resp); c != nil {
		c.served.Add(1) // replayOnNewConn: the connection carried an exchange
	}
	st := resp.StatusCode()
	if !validStatus(st) {
		// fasthttp skips 1xx interim answers, so a final one below 200
		// here (an unasked-for 101, a 099) is the upstream's fault, as on
		// the standard path.
		_ = closeStream(resp.BodyStream(), errBadStatus)
		return 0, fmt.Errorf("%w %d", errBadStatus, st)
	}
	if ups.FailureStatus(st) && p.mayDrop(st) {
		_ = closeStream(resp.BodyStream(), errRetried)
		req.Reset()
		return st, errDropped
	}
	return st, f.writeResponse(p.ex, c)
}

// netLengthMax is the longest answer over HTTP/1.x whose Content-Length
// net/http writes itself (exchange.netLength): net/http holds up to 2,048
// bytes of an answer (bufferBeforeChunkingSize) until the handler returns,
// and then writes the length of all it holds, as ResponseWriter's
// documentation says, unless the answer announces trailers (it would be
// chunked then). The fast path writes such an answer in one Write, so the
// value is the upstream's; net/http writes it with the status line instead
// of as one more field to clone, sort, sanitize and write, about 1,000
// instructions a request (callgrind). Over HTTP/2 net/http takes the field
// out of the header and writes it apart already, so it is copied as it is.
const netLengthMax = 2048

// errRetried closes the body of an answer dropped for a retry.
var errRetried = errors.New("proxy: answer dropped, the request is sent to another target")

// buildRequest fills c.req with the outgoing request as outgoing.go
// writes it (the standard transport applies the same in its Rewrite).
func (f *fastForwarder) buildRequest(c *fastCall, t *fastTarget, r *http.Request, v *view) {
	rt := f.rt
	req := &c.req
	h := &req.Header
	h.DisableNormalizing() // net/http already canonicalized the names
	h.SetNoDefaultContentType(true)
	req.UseHostHeader = true
	h.SetMethod(r.Method)
	c.uri, _ = appendUpstreamTarget(c.uri[:0], t.url, v, rt.stripPrefix)
	h.SetRequestURIBytes(c.uri)
	h.SetHostBytes(t.host)
	if t.https {
		req.URI().SetScheme("https")
	}

	conn := connNamesOf(r.Header["Connection"])
	for k, vv := range r.Header {
		if !rt.forwardHeader(r, k, conn) {
			continue
		}
		switch k {
		case "User-Agent":
			// fasthttp keeps the last; net/http's Transport sends the first.
			vv = vv[:1]
		case "Content-Type":
			if len(vv) == 1 && vv[0] != "" {
				break
			}
			// fasthttp keeps the last, and drops an empty one; net/http's
			// Transport sends them all as they are.
			h.DisableSpecialHeader()
			for _, v := range vv {
				h.Add(k, v)
			}
			h.EnableSpecialHeader()
			continue
		}
		if k == "Cookie" {
			// fasthttp would parse the cookies and write them anew
			// (unquoted, lines merged); the upstream gets them as sent.
			h.DisableSpecialHeader()
			for _, v := range vv {
				h.Add(k, v)
			}
			h.EnableSpecialHeader()
			continue
		}
		for _, v := range vv {
			h.Add(k, v)
		}
	}
	for _, v := range r.Header["Te"] {
		if hasToken(v, "trailers") {
			h.Set("Te", "trailers")
			break
		}
	}
	// SetCanonical: the names are canonical, and Set would copy each name
	// and sanitize each value twice before SetCanonical does it once.
	if chain, ip, ok := rt.snap.sources.forwardedFor(r); ok {
		b := c.xff[:0]
		for _, p := range chain {
			b = append(append(b, p...), ", "...)
		}
		c.xff = append(b, ip...)
		h.SetCanonical(nameXForwardedFor, c.xff)
	}
	h.SetCanonical(nameXForwardedHost, readOnlyBytes(r.Host))
	h.SetCanonical(nameXForwardedProto, readOnlyBytes(rt.snap.sources.forwardedProto(r)))
}

// The names buildRequest sets. Read-only.
var (
	nameXForwardedFor   = []byte("X-Forwarded-For")
	nameXForwardedHost  = []byte("X-Forwarded-Host")
	nameXForwardedProto = []byte("X-Forwarded-Proto")
)

// readOnlyBytes is s's bytes, not copied, for a callee that only reads
// them (fasthttp's SetCanonical copies the value it is given).
func readOnlyBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// setBody gives c.req the client's body: the one the attempts loop kept, or a stream
// of it (only a forced fast route gets those).
func (f *fastForwarder) setBody(c *fastCall, r *http.Request, kept bool) {
	switch {
	case c.body != nil:
		c.req.SetBodyRaw(c.body)
	case !kept:
		// Not closed by fasthttp: the server owns r.Body.
		c.req.SetBodyStream(struct{ io.Reader }{r.Body}, int(r.ContentLength))
	}
}

// writeResponse copies the upstream's answer to the client. A known length
// that fits the buffer is read whole first (a failure then is still a clean
// 502/504); anything else is streamed, with a flush per read when the
// length is unknown or the body is an event stream, and a broken stream
// aborts the response like ReverseProxy does.
func (f *fastForwarder) writeResponse(ex *exchange, c *fastCall) error {
	resp := &c.resp
	status := resp.StatusCode()
	body := resp.BodyStream()
	n := resp.Header.ContentLength()
	if body != nil && n >= 0 && n <= len(c.buf) {
		if _, err := io.ReadFull(body, c.buf[:n]); err != nil {
			_ = closeStream(body, err)
			return err
		}
		_ = resp.CloseBodyStream() // the connection goes back to the pool now
		trailer := copyResponseHeader(ex.Header(), &resp.Header, c)
		ex.netLength = n <= netLengthMax && ex.req.ProtoMajor == 1 && !trailer
		ex.WriteHeader(status)
		_, _ = ex.Write(c.buf[:n])
		return nil
	}
	copyResponseHeader(ex.Header(), &resp.Header, c)
	ex.WriteHeader(status)
	if body == nil { // HEAD, 1xx, 204, 304
		return nil
	}
	var rc *http.ResponseController
	if es := isEventStream(resp.Header.ContentType()); n < 0 || es {
		if es && n < 0 && status/100 == 2 {
			ex.call.answered(f.rt.snap.clock.Now())
		}
		rc = http.NewResponseController(ex)
		_ = rc.Flush() // the status and headers now, as ReverseProxy does
		// A stream may idle for long: a client that leaves ends it at once.
		stop := context.AfterFunc(ex.clientCtx, func() { _ = closeStream(body, errClientGone) })
		defer stop()
	}
	heads := headCounts(&resp.Header)
	buf := c.buf[:cap(c.buf)]
	for {
		nr, rerr := body.Read(buf)
		if nr > 0 {
			if _, werr := ex.Write(buf[:nr]); werr != nil {
				abort(body, werr)
			}
			if rc != nil {
				_ = rc.Flush()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			abort(body, rerr)
		}
	}
	if keys := resp.Header.PeekTrailerKeys(); len(keys) > 0 {
		if rc != nil {
			_ = rc.Flush() // chunked, so the trailers can follow
		}
		h := ex.Header()
		for _, k := range keys {
			name := http.TrailerPrefix + string(k)
			vals := resp.Header.PeekAll(string(k))
			vals = vals[min(heads[string(k)], len(vals)):] // the trailer's own
			for _, v := range vals {
				h[name] = append(h[name], string(v))
			}
		}
	}
	_ = resp.CloseBodyStream()
	return nil
}

// headCounts is how many values each announced trailer field has in the
// answer's head (nil: none announced): fasthttp's PeekAll gives a field's
// head values, then, once the body is read, its trailer values.
func headCounts(h *fasthttp.ResponseHeader) map[string]int {
	keys := h.PeekTrailerKeys()
	if len(keys) == 0 {
		return nil
	}
	m := make(map[string]int, len(keys))
	for _, k := range keys {
		m[string(k)] = len(h.PeekAll(string(k)))
	}
	return m
}

// abort ends a response whose status is already sent: the upstream
// connection is dropped and the client's is cut (http.ErrAbortHandler).
func abort(body io.Reader, err error) {
	_ = closeStream(body, err)
	panic(http.ErrAbortHandler)
}

// closeStream closes a streamed body with an error, so its connection is
// closed rather than pooled.
func closeStream(body io.Reader, err error) error {
	if c, ok := body.(fasthttp.ReadCloserWithError); ok {
		return c.CloseWithError(err)
	}
	return nil
}
