package lifecycle

import (
	"context"
	"errors"
	"fmt"
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
		srvs.admin = &http.Server{Handler: inst.admin.Handler(), ReadHeaderTimeout: inst.adminTimeouts.readHeader,
			IdleTimeout: inst.adminTimeouts.idle, MaxHeaderBytes: maxHeaderBytes,
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
