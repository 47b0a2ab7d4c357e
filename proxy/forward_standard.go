package proxy

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
)

// standardForwarder is httputil.ReverseProxy: it carries everything,
// including upgrades, streams and trailers.
type standardForwarder struct {
	rp      *httputil.ReverseProxy
	timeout time.Duration
}

func (f standardForwarder) name() string { return "standard" }

// forward bounds the whole exchange by the route timeout; the client going
// away cancels the upstream call through the request's context.
func (f standardForwarder) forward(ex *exchange, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), f.timeout)
	defer cancel()
	f.rp.ServeHTTP(ex, r.WithContext(ctx))
}

// newStandardProxy builds the httputil.ReverseProxy of one route: Rewrite
// picks the target round robin, strips the route's prefix and sets the
// X-Forwarded-* headers; the error handler answers 502/504 with a JSON body.
func newStandardProxy(rt *route, transport http.RoundTripper, copyBuffers httputil.BufferPool, log zerolog.Logger) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The prefix is stripped from the client's path before it is
			// joined to the target's own path (if any).
			if rt.stripPrefix != "" {
				pr.Out.URL.Path = stripPrefix(pr.Out.URL.Path, rt.stripPrefix)
				if pr.Out.URL.RawPath != "" {
					pr.Out.URL.RawPath = stripPrefix(pr.Out.URL.RawPath, rt.stripPrefix)
				}
			}
			pr.SetURL(rt.upstream.pick())
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
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
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
