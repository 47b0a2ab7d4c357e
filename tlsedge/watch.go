package tlsedge

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"sluice/config"
)

// Watch reloads the Store whenever one of its files changes, until ctx is
// done, and tells onReload (if not nil) each outcome: nil, or the pairs that
// kept their old certificate. The files are watched the way rules.yaml is
// (their directories, so renames into place and symlink swaps such as
// certbot's live/ links and Kubernetes' ..data are seen). A certificate and
// its key are rarely replaced in one step: changes are gathered for debounce
// after the last one before reloading, and a pair caught half-renewed keeps
// its old certificate until the second file arrives and reloads it.
func (s *Store) Watch(ctx context.Context, debounce time.Duration, log zerolog.Logger, onReload func(error)) error {
	return s.watch(ctx, debounce, log, onReload, nil)
}

// watch is Watch, closing ready once every file is watched.
func (s *Store) watch(ctx context.Context, debounce time.Duration, log zerolog.Logger, onReload func(error), ready chan<- struct{}) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kick := make(chan struct{}, 1)
	watching := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- config.WatchFiles(ctx, s.Files(), debounce, log, func() {
			select {
			case kick <- struct{}{}:
			default:
			}
		}, watching)
	}()
	timer := time.NewTimer(debounce)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return <-errc
		case err := <-errc:
			return err
		case <-watching:
			watching = nil
			log.Info().Strs("files", s.Files()).Msg("watching the TLS certificate files")
			// The files are read once more: a renewal written since they
			// were first loaded, before the watch was in place, would
			// otherwise wait for the next one.
			timer.Reset(debounce)
			if ready != nil {
				close(ready)
			}
		case <-kick:
			timer.Reset(debounce)
		case <-timer.C:
			_ = s.ReloadNow(log, onReload)
		}
	}
}

// ReloadNow is what Watch does once the files changed, on demand (SIGHUP:
// systemd's ExecReload after a renewal, or a gateway whose watch could not
// start): reload, log the outcome, tell onReload (if not nil) and return it.
func (s *Store) ReloadNow(log zerolog.Logger, onReload func(error)) error {
	err := s.Reload()
	if err != nil {
		log.Error().Err(err).Msg("TLS certificates: a renewal did not load; the previous certificate is still served")
	} else {
		for _, c := range s.Certificates() {
			log.Info().Str("name", c.Name).Time("notAfter", c.NotAfter).Str("certFile", c.CertFile).Msg("TLS certificate loaded")
		}
	}
	if onReload != nil {
		onReload(err)
	}
	return err
}
