package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rs/zerolog"
)

// servers are the HTTP servers running on the listeners.
type servers struct {
	traffic *traffic
	admin   *http.Server // nil: the admin listener is off
	failed  chan error   // a traffic server stopped by itself
}

// startServers serves lns: the admin API first, then traffic. It also starts
// watching the TLS certificate files for renewals.
func (inst *Instance) startServers(ctx context.Context, lns listeners) servers {
	go lns.traffic.watchCerts(ctx, inst.log, inst.certs.report)
	srvs := servers{traffic: lns.traffic, failed: make(chan error, 1)}
	if lns.admin != nil {
		srvs.admin = &http.Server{Handler: bodyDeadline(inst.admin.Handler(), inst.adminTimeouts.readHeader),
			ReadHeaderTimeout: inst.adminTimeouts.readHeader, IdleTimeout: inst.adminTimeouts.idle, MaxHeaderBytes: maxHeaderBytes,
			// A client that does not take its answer within sendTimeout
			// (a large /api/rules/raw it never reads) is cut, as one that
			// withholds its body is (bodyDeadline): the admin listener
			// holds adminMaxConnections, and such clients held them for
			// ever. net/http/pprof adds a profile's or trace's seconds.
			WriteTimeout: inst.adminTimeouts.send,
			// "OPTIONS *" too goes through the admin API's Host check (SPEC §11).
			DisableGeneralOptionsHandler: true}
		go func() {
			if err := srvs.admin.Serve(lns.admin); err != nil && !errors.Is(err, http.ErrServerClosed) {
				inst.log.Error().Err(err).Msg("admin listener stopped")
			}
		}()
		inst.log.Info().Str("admin", lns.admin.Addr().String()).Msg("admin listening")
	}
	lns.traffic.serve(srvs.failed)
	return srvs
}

// bodyDeadline gives a request with a body (a rules edit, or a body sent
// where none is read) readHeaderTimeout more to send it, as its headers had.
// net/http reads a body with no deadline, and, before it answers, drains
// up to 256 KB of one the handler left unread: 256 connections that each
// declared a body and sent 3 bytes of it held every admin connection, the
// probes and scrapes waiting behind them, for as long as they stayed open.
// The deadline is lifted at the body's end, and a request without one
// gets none: net/http reads the connection in the background while the
// handler runs (a 30 s profile, an edit's check and save), and a deadline
// there would end the request.
func bodyDeadline(h http.Handler, readHeaderTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody && readHeaderTimeout > 0 {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(readHeaderTimeout)) == nil {
				r.Body = &liftAtEOF{ReadCloser: r.Body, rc: rc}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// liftAtEOF lifts the connection's read deadline once the body has been
// read to its end.
type liftAtEOF struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted bool
}

func (b *liftAtEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted {
		b.lifted = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// drain waits for ctx to be done, then shuts down within timeout: traffic
// first (Shutdown closes the listeners at once, then waits for the requests
// in flight, and tunnels for the WebSockets), then the admin API, which stays up meanwhile so the drain
// shows in its metrics, then the demo upstreams, which answer what is in
// flight. Requests still running at the timeout are cut, and that is not an
// error. It returns early with an error if a traffic server fails.
func drain(ctx context.Context, srvs servers, tunnels func(context.Context) error, stopDemo func(context.Context), timeout time.Duration, log zerolog.Logger) error {
	select {
	case err := <-srvs.failed:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info().Dur("drainTimeout", timeout).Msg("shutting down: draining in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srvs.traffic.shutdown(sctx)
	// The server's Shutdown does not wait for hijacked connections: the
	// WebSockets are waited for here, within the same drain.
	err = errors.Join(err, tunnels(sctx))
	if srvs.admin != nil {
		_ = srvs.admin.Shutdown(sctx)
	}
	stopDemo(sctx)
	if err != nil {
		log.Warn().Err(err).Msg("drain timeout: some requests were cut")
		return nil
	}
	log.Info().Msg("stopped")
	return nil
}
