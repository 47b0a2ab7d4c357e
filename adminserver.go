package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"sluice/admin"
	"sluice/config"
	"sluice/limiter"
	"sluice/proxy"
)

// startAdmin serves the admin API, metrics and dashboard on addr.
func startAdmin(ctx context.Context, addr string, cfg *config.Config, rl *reloader, state func() admin.State, gw *proxy.Gateway,
	reg *prometheus.Registry, log zerolog.Logger) (*http.Server, error) {
	token := cfg.Admin.Token
	if env := os.Getenv("SLUICE_ADMIN_TOKEN"); env != "" {
		token = env
	}
	srv := admin.New(admin.Options{
		Log:        log,
		Token:      token,
		Registry:   reg,
		State:      state,
		ConfigPath: rl.path,
		Validate: func(path string, data []byte) error {
			_, err := config.Parse(path, data)
			return err
		},
		Reload: rl.request,
		Now:    time.Now,
		Stats: func() []admin.ResourceStats {
			s := gw.Current()
			if s == nil {
				return nil
			}
			return adminStats(s.Flow.Stats(gw.Now()))
		},
	})
	go srv.Run(ctx)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listen %s: %w", addr, err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("admin listener stopped")
		}
	}()
	log.Info().Str("admin", ln.Addr().String()).Msg("admin listening")
	return hs, nil
}

func adminStats(in []limiter.ResourceStats) []admin.ResourceStats {
	out := make([]admin.ResourceStats, len(in))
	for i, r := range in {
		out[i] = admin.ResourceStats{Resource: r.Resource, NodeStats: admin.NodeStats(r.Node),
			Origins: named(r.Origins), Entrances: named(r.Entrances)}
	}
	return out
}

func named(in []limiter.NamedStats) []admin.NamedStats {
	out := make([]admin.NamedStats, len(in))
	for i, n := range in {
		out[i] = admin.NamedStats{Name: n.Name, NodeStats: admin.NodeStats(n.NodeStats)}
	}
	return out
}
