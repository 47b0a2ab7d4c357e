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
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	ups "sluice/upstream"
)

// standardForwarder is httputil.ReverseProxy: it carries everything,
// including upgrades, streams and trailers. It has two ReverseProxies per
// target: pass sends every answer to the client; retry (nil when the
// upstream never retries) fails an attempt answered 502/503/504, so that it
// can be sent to another target. Which one an attempt uses is decided
// before it is sent (prepared.drop: ReverseProxy's hooks cannot reach the
// request's state without an allocation). It is the standard path's
// transport: the attempts loop (route.attempts) owns the policy.
type standardForwarder struct {
	rt    *route
	pass  []*httputil.ReverseProxy
	retry []*httputil.ReverseProxy
	log   zerolog.Logger
}

func (f *standardForwarder) name() string { return "standard" }

func newStandardForwarder(rt *route, transport http.RoundTripper, copyBuffers httputil.BufferPool, log zerolog.Logger) *standardForwarder {
	up := rt.upstream
	f := &standardForwarder{rt: rt, log: log}
	for _, t := range up.targets {
		f.pass = append(f.pass, newStandardProxy(rt, t, false, transport, copyBuffers, log))
		if up.retries > 0 {
			f.retry = append(f.retry, newStandardProxy(rt, t, true, transport, copyBuffers, log))
		}
	}
	return f
}

func (f *standardForwarder) forward(ex *exchange, r *http.Request) { f.rt.attempts(ex, r, f, f.log) }

// open binds the request to the route deadline; the client going away
// cancels the upstream call through its context. The request's URL is
// made the view, whence ReverseProxy's clone and Rewrite (which reach
// nothing else without an allocation) take it: RawPath is the view's
// path, RawQuery its query; a client's userinfo (absolute-form) is not
// turned into an Authorization header.
func (f *standardForwarder) open(p *prepared) {
	r, v := p.r, &p.ex.view
	ctx, cancel := context.WithDeadline(r.Context(), p.deadline)
	u := r.URL
	u.Opaque, u.User, u.Path, u.RawPath = "", nil, unescapedPath(v.path), v.path
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = v.query, false, "", ""
	p.req, p.cancel = r.WithContext(ctx), cancel
}

func (f *standardForwarder) close(p *prepared) { p.cancel() }
func (f *standardForwarder) keeps() bool       { return false }

// bodyBuf allocates: net/http's Transport may still read a body after
// the handler returned, so it cannot be pooled.
func (f *standardForwarder) bodyBuf(_ *prepared, n int) []byte { return make([]byte, n) }

// send serves p's attempt through the target's ReverseProxy: the one
// that drops a 502/503/504 answer when p.drop says a retry may follow.
// The error handler writes nothing: it leaves the error in p.err.
func (f *standardForwarder) send(p *prepared) (int, error) {
	rp := f.pass[p.target]
	if p.drop {
		rp = f.retry[p.target]
	}
	if p.body != nil {
		p.req.Body = io.NopCloser(bytes.NewReader(p.body))
	}
	p.err = nil
	rp.ServeHTTP(p.ex, p.req)
	err := p.err
	if err == nil {
		return p.ex.status, nil
	}
	p.err = nil
	var rs *retryStatusError
	if errors.As(err, &rs) {
		return rs.code, errDropped
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

// newStandardProxy builds the httputil.ReverseProxy of one route and
// target: Rewrite strips the route's prefix and sets the X-Forwarded-*
// headers; the error handler hands the error to the attempts loop (send).
// retry: a 502/503/504 answer fails the attempt instead of reaching the
// client.
func newStandardProxy(rt *route, target *url.URL, retry bool, transport http.RoundTripper,
	copyBuffers httputil.BufferPool, log zerolog.Logger) *httputil.ReverseProxy {
	joins := target.Path != "" || target.RawPath != "" || target.RawQuery != ""
	return &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The request-target is the one the fast forwarder sends:
			// the view's path (forward put it in In.URL.RawPath), the
			// prefix stripped, joined to the target's path, and the
			// target's query before the view's (SetURL's, on the view).
			out := pr.Out.URL // a copy of the view (forward)
			if rt.stripPrefix != "" || joins {
				v := view{path: out.RawPath, query: out.RawQuery}
				b, n := appendUpstreamTarget(nil, target, &v, rt.stripPrefix)
				out.RawPath, out.RawQuery = string(b[:n]), ""
				if n < len(b) {
					out.RawQuery = string(b[n+1:])
				}
				out.Path = unescapedPath(out.RawPath)
			}
			out.Scheme, out.Host = target.Scheme, target.Host
			pr.Out.Host = ""
			// ReverseProxy drops inbound X-Forwarded-* before Rewrite. A chain
			// is only extended when the peer is a trusted proxy; otherwise the
			// client's own claims are replaced by what we saw.
			if rt.snap.sources.peerTrusted(pr.In) {
				if xff := pr.In.Header["X-Forwarded-For"]; len(xff) > 0 {
					pr.Out.Header["X-Forwarded-For"] = xff
				}
			}
			pr.SetXForwarded()
			if rt.stripOrigin != "" {
				pr.Out.Header.Del(rt.stripOrigin)
			}
		},
		// A final status net/http cannot write (below 100 or above 999)
		// would panic in WriteHeader and reach the client as a cut
		// connection: it is an upstream failure, answered 502.
		ModifyResponse: func(resp *http.Response) error {
			if !validStatus(resp.StatusCode) && resp.StatusCode != http.StatusSwitchingProtocols {
				return fmt.Errorf("%w %d", errBadStatus, resp.StatusCode)
			}
			if retry && ups.FailureStatus(resp.StatusCode) {
				return retryStatuses[resp.StatusCode-502]
			}
			return nil
		},
		// The attempts loop decides what an error means (route.attempts).
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if ex, ok := w.(*exchange); ok {
				ex.out.err = err
				return
			}
			upstreamFailed(w, r, err, log)
		},
		ErrorLog:   stdlog.New(debugWriter{log}, "", 0),
		BufferPool: copyBuffers,
	}
}

// copyBuffers lends ReverseProxy its 32 KiB copy buffers; without it each
// request allocates one. Safe for concurrent use.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if p, ok := b.p.Get().(*[]byte); ok {
		return *p
	}
	return make([]byte, 32<<10) // ReverseProxy's own default size
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// debugWriter sends ReverseProxy's own log lines (a body copy that broke)
// to the gateway's log at debug level instead of the process's stderr.
type debugWriter struct{ log zerolog.Logger }

func (w debugWriter) Write(p []byte) (int, error) {
	w.log.Debug().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}

// upstreamFailed answers a transport failure: 504 when the route timeout
// expired, 502 otherwise, nothing when the client itself went away. A
// failure to read the client's own body is the client's: 408 for a body
// that did not arrive in time, 400 otherwise, and no upstream error.
func upstreamFailed(w http.ResponseWriter, r *http.Request, err error, log zerolog.Logger) {
	ex, _ := w.(*exchange)
	if ex != nil {
		if ex.bodyFailed() {
			log.Debug().Err(err).Str("path", r.URL.Path).Msg("client body failed")
			// Answered even if the client seems gone: one that only
			// half-closed is still reading, and an answer costs nothing.
			ex.clientGone = ex.clientCtx.Err() != nil
			if ex.body.timedOut.Load() {
				writeJSON(w, http.StatusRequestTimeout, bodyClientTimeout)
			} else {
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
	if isTimeout(err) {
		log.Debug().Err(err).Str("path", r.URL.Path).Msg("upstream timeout")
		writeJSON(w, http.StatusGatewayTimeout, bodyTimeout)
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

func stripPrefix(p, prefix string) string {
	if !strings.HasPrefix(p, prefix) {
		return p
	}
	p = p[len(prefix):]
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p
}
