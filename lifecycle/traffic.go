package lifecycle

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"sluice/admin"
	"sluice/config"
	"sluice/proxy"
	"sluice/tlsedge"
)

// traffic is the listeners requests come in on: plain HTTP on listen (with
// h2c when http2.h2c is set, or a redirect to https with tls.redirectHttp)
// and HTTPS on tls.listen (h2 by ALPN unless http2.tls is false). Both
// serve the same gateway: every HTTP/2 stream is one request to it.
type traffic struct {
	servers []*http.Server
	lns     []net.Listener
	// certs serves the TLS listener's certificates; nil without tls.listen.
	certs *tlsedge.Store
}

// listenTraffic opens the listeners of cfg. Its listen is the plain address
// in force (-listen's, if given: Options.overrides); "" opens none.
// A failed TLS handshake is counted by tlsMetrics (nil: not counted).
func listenTraffic(cfg *config.Config, gw *proxy.Gateway, log zerolog.Logger, tlsMetrics *admin.TLSMetrics) (*traffic, error) {
	t := &traffic{}
	errLog := stdlog.New(newServerLog(log, tlsMetrics), "", 0)
	server := func(h http.Handler, protos http.Protocols) *http.Server {
		return &http.Server{
			Handler:   h,
			Protocols: &protos,
			// A client dribbling its headers is cut after ReadHeaderTimeout.
			// No ReadTimeout/WriteTimeout: bodies stream both ways for as long
			// as the route's upstream timeout allows, and a client that stops
			// taking the response is cut by server.sendTimeout (gw.Listener).
			ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout.D(), // -read-header-timeout's, if given (Options.overrides)
			IdleTimeout:       cfg.Server.IdleTimeout.D(),
			// Larger headers get 431 from net/http before any handler runs
			// (on HTTP/2, the same bound on the header list).
			MaxHeaderBytes: maxHeaderBytes,
			HTTP2:          &http.HTTP2Config{MaxConcurrentStreams: cfg.Server.MaxConcurrentStreams},
			ErrorLog:       errLog,
			// A throttle-queued request with an unread body looks at its
			// socket to see its client leave (Gateway.queueWait).
			ConnContext: gw.ConnContext,
		}
	}
	if tc := cfg.TLS; tc.Listen != "" {
		var protos http.Protocols
		protos.SetHTTP1(true)
		protos.SetHTTP2(cfg.HTTP2.OverTLS())
		certs, err := loadCerts(cfg)
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", tc.Listen)
		if err != nil {
			return nil, fmt.Errorf("tls.listen %s: %w", tc.Listen, err)
		}
		ln = gw.Listener(ln)
		srv := server(gw, protos)
		srv.TLSConfig = certs.TLSConfig()
		t.certs = certs
		t.servers, t.lns = append(t.servers, srv), append(t.lns, ln)
	}
	if listen := cfg.Listen; listen != "" {
		var protos http.Protocols
		protos.SetHTTP1(true)
		protos.SetUnencryptedHTTP2(cfg.HTTP2.H2C)
		var h http.Handler = gw
		if cfg.TLS.RedirectHTTP && t.certs != nil {
			h = tlsedge.Redirect(t.lns[0].Addr().String())
		}
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			t.close()
			return nil, fmt.Errorf("listen %s: %w", listen, err)
		}
		ln = gw.Listener(ln)
		t.servers, t.lns = append(t.servers, server(h, protos)), append(t.lns, ln)
	}
	if len(t.servers) == 0 {
		return nil, errors.New("no listener: set listen or tls.listen")
	}
	return t, nil
}

// addrs names the listeners for the start-up log.
func (t *traffic) addrs() (plain, secure string) {
	for i := range t.servers {
		if t.isTLS(i) {
			secure = t.lns[i].Addr().String()
		} else {
			plain = t.lns[i].Addr().String()
		}
	}
	return plain, secure
}

// isTLS reports whether listener i is the TLS one, which listenTraffic
// opens first. Not read from the server's TLSConfig: Serve on a plain
// server with HTTP/2 sets one, in the serving goroutine, and a start-up
// log that read it then named the plain listener "tls" and left "listen"
// empty (an e2e run with a core busy).
func (t *traffic) isTLS(i int) bool { return i == 0 && t.certs != nil }

// serve runs every listener; the first one to stop reports on errc.
func (t *traffic) serve(errc chan<- error) {
	for i, srv := range t.servers {
		ln := t.lns[i]
		go func() {
			var err error
			if t.isTLS(i) {
				err = srv.ServeTLS(ln, "", "")
			} else {
				err = srv.Serve(ln)
			}
			select {
			case errc <- err:
			default:
			}
		}()
	}
}

// shutdown closes every listener at once and waits for the requests in
// flight on all of them, until ctx ends.
func (t *traffic) shutdown(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(t.servers))
	for i, srv := range t.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = srv.Shutdown(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (t *traffic) close() {
	for _, ln := range t.lns {
		ln.Close()
	}
}

// watchCerts reloads renewed certificates until ctx ends, keeping the old
// pair when a new one does not load; report is told each outcome.
func (t *traffic) watchCerts(ctx context.Context, log zerolog.Logger, report func(error)) {
	if t.certs == nil {
		return
	}
	if err := t.certs.Watch(ctx, 200*time.Millisecond, log, report); err != nil && ctx.Err() == nil {
		log.Error().Err(err).Msg("cannot watch the TLS certificate files; reload them with SIGHUP")
	}
}

// serverLog sends net/http's own log lines (a failed TLS handshake, a
// client's bad HTTP/2 frames) to the log at debug level: a scanner could
// otherwise fill the log, in net/http's format, one line per connection.
// A failed accept is the exception: it is the gateway's own trouble (out
// of descriptors, EMFILE), every client is kept waiting while net/http
// retries, and the operator must hear of it, at warn, at most once a second.
// A failed TLS handshake, which net/http tells of only here, is counted
// too (sluice_tls_handshake_errors_total).
type serverLog struct {
	log    zerolog.Logger
	accept zerolog.Logger    // log, sampled
	tls    *admin.TLSMetrics // nil: handshakes not counted
}

func newServerLog(log zerolog.Logger, tlsMetrics *admin.TLSMetrics) serverLog {
	return serverLog{log: log, accept: log.Sample(&zerolog.BurstSampler{Burst: 1, Period: time.Second}), tls: tlsMetrics}
}

func (l serverLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.HasPrefix(msg, "http: Accept error") {
		l.accept.Warn().Str("component", "net/http").Msg(msg + " (at most one such line a second)")
		return len(p), nil
	}
	if reason, ok := tlsedge.HandshakeFailure(msg); ok && l.tls != nil {
		l.tls.HandshakeFailed(reason)
	}
	l.log.Debug().Str("component", "net/http").Msg(msg)
	return len(p), nil
}
