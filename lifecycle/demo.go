package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"
)

// demoAddrs are where -demo serves its upstreams; the shipped rules.yaml points at them.
var demoAddrs = [...]string{"127.0.0.1:9001", "127.0.0.1:9002"}

// startDemo starts two small upstreams so the shipped rules.yaml works with
// nothing else running. Each answers JSON naming itself and the path;
// ?sleep=200ms delays the answer and ?status=500 sets the status, to try
// circuit breakers and concurrency rules by hand. stop drains them, after
// the gateway has drained the requests it forwards to them.
func startDemo(log zerolog.Logger) (stop func(context.Context), err error) {
	var srvs []*http.Server
	stop = func(ctx context.Context) {
		for _, srv := range srvs {
			_ = srv.Shutdown(ctx)
		}
	}
	for _, addr := range demoAddrs {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			stop(context.Background())
			return nil, fmt.Errorf("demo upstream %s: %w", addr, err)
		}
		srv := &http.Server{Handler: demoHandler(addr), ReadHeaderTimeout: 5 * time.Second}
		srvs = append(srvs, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error().Err(err).Str("addr", addr).Msg("demo upstream stopped")
			}
		}()
		log.Info().Str("addr", addr).Msg("demo upstream started")
	}
	return stop, nil
}

func demoHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if d, err := time.ParseDuration(q.Get("sleep")); err == nil && d > 0 {
			select {
			case <-time.After(min(d, time.Minute)):
			case <-r.Context().Done():
				return
			}
		}
		status := http.StatusOK
		if s, err := strconv.Atoi(q.Get("status")); err == nil && s >= 200 && s <= 599 {
			status = s
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"upstream": name, "method": r.Method, "path": r.URL.Path, "origin": r.Header.Get("X-Origin"),
		})
	})
}
