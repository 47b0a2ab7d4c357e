// Command sluice is an HTTP reverse-proxy gateway with Sentinel-style flow
// control, configured by one live-reloaded rules.yaml. main wires the
// packages: config -> (limiter, hotparam, cluster) -> proxy, and admin.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"sluice/admin"
	"sluice/cluster"
	"sluice/config"
	"sluice/limiter"
	"sluice/limiter/circuit"
	"sluice/limiter/system"
	"sluice/proxy"
)

// maxHeaderBytes bounds a request's header block (net/http adds 4 KiB of
// slack); beyond it the client gets 431.
const maxHeaderBytes = 64 << 10

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "version":
			fmt.Fprintf(stdout, "sluice %s\n", version)
			return 0
		case "validate":
			return validate(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("sluice", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.config, "config", "rules.yaml", "rules file")
	fs.StringVar(&o.listen, "listen", "", "traffic listen address (overrides the file's listen)")
	fs.StringVar(&o.admin, "admin", "", `admin listen address (overrides admin.listen; "off" turns it off)`)
	fs.StringVar(&o.logLevel, "log-level", "", "log level: debug|info|warn|error (overrides log.level)")
	fs.StringVar(&o.logFormat, "log-format", "", "log format: json|console (overrides log.format)")
	fs.BoolVar(&o.demo, "demo", false, "also start the built-in demo upstreams on 127.0.0.1:9001 and :9002")
	fs.DurationVar(&o.drain, "drain-timeout", 15*time.Second, "how long shutdown waits for in-flight requests")
	fs.DurationVar(&o.readHeader, "read-header-timeout", 10*time.Second, "how long a client may take to send its request headers (slowloris guard)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, o, stderr); err != nil {
		fmt.Fprintf(stderr, "sluice: %v\n", err)
		return 1
	}
	return 0
}

type options struct {
	config, listen, admin, logLevel, logFormat string
	demo                                       bool
	drain, readHeader                          time.Duration
}

// validate is `sluice validate [rules.yaml]`: every error as FILE:LINE: message.
func validate(args []string, stdout, stderr io.Writer) int {
	path := "rules.yaml"
	if len(args) > 0 {
		path = args[0]
	}
	if _, err := config.Load(path); err != nil {
		var es config.Errors
		if errors.As(err, &es) {
			for _, e := range es {
				fmt.Fprintln(stderr, e.String())
			}
		} else {
			fmt.Fprintln(stderr, err)
		}
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	return 0
}

func serve(ctx context.Context, o options, stderr io.Writer) error {
	// SIGHUP is ours from the start to the exit: unhandled, its default
	// action would kill the process, cutting a drain in progress.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	cfg, err := config.Load(o.config)
	log := newLogger(stderr, o, cfg)
	if err != nil {
		logConfigErrors(log, err, "rules are invalid; not starting")
		return errors.New("invalid rules file")
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := admin.NewMetrics(reg)

	cpu := system.NewProcessCPU()
	go cpu.Run(ctx, time.Second)

	deps := proxy.Deps{
		Log:      log,
		Observer: func(res string) proxy.Observer { return metrics.Resource(res) },
		CPU:      cpu,
		OnCircuit: func(res string, from, to circuit.State) {
			log.Warn().Str("resource", res).Str("from", from.String()).Str("to", to.String()).Msg("circuit breaker")
			metrics.CircuitState(res, int(to))
		},
	}
	if svc, err := startCluster(ctx, cfg, log, metrics); err != nil {
		return err
	} else if svc != nil {
		defer svc.Close()
		deps.Cluster = svc
	}

	gw := proxy.New(deps)
	rl := newReloader(o.config, gw, log, metrics)
	rl.clusterOn = deps.Cluster != nil
	rl.flagged = map[string]bool{"listen": o.listen != "", "log.level": o.logLevel != "", "log.format": o.logFormat != ""}
	if !rl.apply(cfg) {
		return errors.New("cannot build the gateway from the rules file")
	}
	go rl.watch(ctx, hup)

	stopDemo := func(context.Context) {}
	if o.demo {
		if stopDemo, err = startDemo(log); err != nil {
			return err
		}
	}

	listen := cfg.Listen
	if o.listen != "" {
		listen = o.listen
	}
	tr, err := listenTraffic(cfg, listen, gw, o, log)
	if err != nil {
		return err
	}
	certs := newCertStatus(tr, metrics, admin.NewTLSMetrics(reg), log)
	go tr.watchCerts(ctx, log, certs.report)

	adminAddr := cfg.AdminListen()
	switch o.admin {
	case "":
	case "off":
		adminAddr = ""
	default:
		adminAddr = o.admin
	}
	var adminSrv *http.Server
	if adminAddr != "" {
		adminSrv, err = startAdmin(ctx, adminAddr, cfg, rl, certs.state(rl.state), gw, reg, log)
		if err != nil {
			tr.close()
			return err
		}
	}

	plain, secure := tr.addrs()
	log.Info().Str("listen", plain).Str("tls", secure).Str("admin", adminAddr).Str("config", o.config).
		Str("version", version).Msg("sluice started")
	errc := make(chan error, 1)
	tr.serve(errc)

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info().Dur("drainTimeout", o.drain).Msg("shutting down: draining in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), o.drain)
	defer cancel()
	// Traffic first: Shutdown closes the listener at once, then waits for
	// the requests in flight. The admin API stays up meanwhile (the drain
	// shows in its metrics) and the demo upstreams answer what is in flight.
	err = tr.shutdown(sctx)
	if adminSrv != nil {
		_ = adminSrv.Shutdown(sctx)
	}
	stopDemo(sctx)
	if err != nil {
		log.Warn().Err(err).Msg("drain timeout: some requests were cut")
		return nil
	}
	log.Info().Msg("stopped")
	return nil
}

// startCluster connects the Redis token service when a rule needs it.
func startCluster(ctx context.Context, cfg *config.Config, log zerolog.Logger, m *admin.Metrics) (*cluster.Service, error) {
	need := false
	for _, r := range cfg.FlowRules {
		need = need || r.ClusterMode
	}
	if !need {
		return nil, nil
	}
	svc, err := cluster.New(cluster.Options{
		URL:       cfg.Cluster.Redis,
		Namespace: cfg.Cluster.Namespace,
		Log:       log,
		OnState:   m.ClusterUp,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	// go-redis reports failed dials through its own process-wide logger,
	// once per dial; the Service already logs each state change once.
	redis.SetLogger(redisLog{log})
	go svc.Run(ctx)
	return svc, nil
}

// redisLog sends go-redis's own log lines to zerolog at debug level, so a
// down Redis does not print a line per reconnect attempt in go-redis's own
// format; -log-level debug shows them.
type redisLog struct{ log zerolog.Logger }

func (l redisLog) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug().Str("component", "go-redis").Msgf(format, v...)
}

var _ limiter.TokenService = (*cluster.Service)(nil)
