package main

import (
	"context"
	"errors"
	"fmt"
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

// gateway is everything build wires from the rules file, before any
// listener is open.
type gateway struct {
	log      zerolog.Logger
	proxy    *proxy.Gateway
	reloader *reloader
	registry *prometheus.Registry
	metrics  *admin.Metrics
	admin    *admin.Server    // nil: the admin listener is off
	cluster  *cluster.Service // nil: no clusterMode rule at start
	fleet    *fleet           // nil: no rulesSource
	// certs reports the TLS listener's certificates; set by startServers,
	// before the admin API serves a request.
	certs *certStatus
}

// build wires metrics, the CPU sampler, the Redis token service (when a
// clusterMode rule needs it), the gateway with cfg loaded, its reloader and
// the admin server. Its goroutines stop with ctx; close releases the rest.
// fl is the rules source cfg's document came from (nil: none); the gateway
// owns it from here on.
func build(ctx context.Context, o options, cfg *config.Config, fl *fleet, log zerolog.Logger) (*gateway, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := admin.NewMetrics(reg)

	cpu := system.NewProcessCPU()
	go cpu.Run(ctx, time.Second)

	deps := proxy.Deps{
		Log:       log,
		Observer:  func(res string) proxy.Observer { return metrics.Resource(res) },
		Upstreams: upstreamObserver{metrics},
		CPU:       cpu,
		Forwarder: o.forwarder,
		OnCircuit: func(res string, from, to circuit.State) {
			log.Warn().Str("resource", res).Str("from", from.String()).Str("to", to.String()).Msg("circuit breaker")
			metrics.CircuitState(res, int(to))
		},
	}
	g := &gateway{log: log, registry: reg, metrics: metrics, fleet: fl}
	svc, err := startCluster(ctx, cfg, log, metrics)
	if err != nil {
		return nil, err
	}
	if svc != nil {
		g.cluster, deps.Cluster = svc, svc
	}

	g.proxy = proxy.New(deps)
	g.reloader = newReloader(o, g.proxy, log, metrics)
	g.reloader.clusterOn = deps.Cluster != nil
	g.reloader.fleet = fl
	if fl != nil {
		if err := admin.RegisterSourceMetrics(reg, g.adminState, time.Now); err != nil {
			return nil, err
		}
	}
	if o.adminAddr(cfg) != "" {
		g.admin = newAdmin(g)
		g.reloader.setToken = g.admin.SetToken
		g.reloader.setHosts = g.admin.SetHosts
		go g.admin.Run(ctx)
	}
	if !g.reloader.apply(cfg) {
		g.close()
		return nil, errors.New("cannot build the gateway from the rules file")
	}
	if fl != nil {
		g.reloader.logDocument(fl.started())
	}
	return g, nil
}

// adminState is what the admin API shows: the rules in force, the TLS
// certificates' last error and the cluster token service's Redis.
func (g *gateway) adminState() admin.State {
	var st admin.State
	if g.certs == nil {
		st = g.reloader.state()
	} else {
		st = g.certs.state(g.reloader.state)()
	}
	if g.cluster != nil {
		st.Cluster = g.cluster.Status()
	}
	return st
}

// close stops what build started that ctx does not stop.
func (g *gateway) close() {
	g.proxy.Close() // the upstreams' health probes
	if g.cluster != nil {
		g.cluster.Close()
	}
	if g.fleet != nil {
		g.fleet.close()
	}
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
	svc, err := cluster.New(clusterOptions(cfg, log, m))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	// go-redis reports failed dials through its own process-wide logger,
	// once per dial; the Service already logs each state change once.
	redis.SetLogger(redisLog{log})
	go svc.Run(ctx)
	return svc, nil
}

func clusterOptions(cfg *config.Config, log zerolog.Logger, m *admin.Metrics) cluster.Options {
	return cluster.Options{
		Redis:     cfg.Cluster.RedisTarget,
		Namespace: cfg.Cluster.Namespace,
		Log:       log,
		OnStatus: func(st cluster.Status) {
			ms := make([]admin.RedisMaster, len(st.Masters))
			for i, x := range st.Masters {
				ms[i] = admin.RedisMaster{Addr: x.Addr, Up: x.Up}
			}
			m.ClusterRedis(st.Form, ms)
		},
	}
}

// redisLog sends go-redis's own log lines to zerolog at debug level, so a
// down Redis does not print a line per reconnect attempt in go-redis's own
// format; -log-level debug shows them.
type redisLog struct{ log zerolog.Logger }

func (l redisLog) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug().Str("component", "go-redis").Msgf(format, v...)
}

var _ limiter.TokenService = (*cluster.Service)(nil)

// envAdminToken names the environment variable whose token wins over
// admin.token; run reads it once, since a process's environment does not
// change under it.
const envAdminToken = "SLUICE_ADMIN_TOKEN"
