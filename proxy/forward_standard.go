package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"

	"github.com/rs/zerolog"
)

// newStandardProxy builds the httputil.ReverseProxy of one route: Rewrite
// picks the target round robin, strips the route's prefix and sets the
// X-Forwarded-* headers; the error handler answers 502/504 with a JSON body.
func newStandardProxy(rt *route, transport http.RoundTripper, log zerolog.Logger) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(rt.upstream.pick())
			if rt.stripPrefix != "" {
				pr.Out.URL.Path = stripPrefix(pr.Out.URL.Path, rt.stripPrefix)
				if pr.Out.URL.RawPath != "" {
					pr.Out.URL.RawPath = stripPrefix(pr.Out.URL.RawPath, rt.stripPrefix)
				}
			}
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
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			upstreamFailed(w, r, err, log)
		},
		ErrorLog: nil,
	}
}

// upstreamFailed answers a transport failure: 504 when the route timeout
// expired, 502 otherwise, nothing when the client itself went away.
func upstreamFailed(w http.ResponseWriter, r *http.Request, err error, log zerolog.Logger) {
	ex, _ := w.(*exchange)
	if ex != nil {
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

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
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
