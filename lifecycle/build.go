package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"sluice/admin"
	"sluice/cluster"
	"sluice/config"
	"sluice/hotparam"
	"sluice/limiter"
	"sluice/limiter/circuit"
	"sluice/limiter/system"
	"sluice/proxy"
	"sluice/tlsedge"
)

// Instance is one gateway process's lifecycle: what New wires from the
// rules file (metrics, the proxy with its snapshot, the reloader, the admin
// API, the cluster token service, the rules source) and the listeners it
// opened, which Run serves until its context ends.
type Instance struct {
	opts     Options
	log      zerolog.Logger
	proxy    *proxy.Gateway
	reloader *reloader
	registry *prometheus.Registry
	metrics  *admin.Metrics
	// tlsMetrics: the served certificates' expiry, the failed handshakes.
	tlsMetrics *admin.TLSMetrics
	cpu        *system.ProcessCPU
	admin      *admin.Server // nil: the admin listener is off
	// adminTimeouts are server.readHeaderTimeout, server.idleTimeout and
	// server.sendTimeout as the gateway started: the admin listener's
	// connections are as bounded as the traffic listeners'.
	adminTimeouts struct{ readHeader, idle, send time.Duration }
	cluster       *cluster.Service // nil: no clusterMode rule at start
	fleet         *fleet           // nil: no rulesSource
	// certs reports the TLS listener's certificates; set by startServers,
	// before the admin API serves a request.
	certs    *certStatus
	lns      listeners             // opened by New, served by Run
	stopDemo func(context.Context) // drains the -demo upstreams
	// draining: shutdown has begun; /readyz says so while the admin API
	// stays up for the drain.
	draining atomic.Bool
}

// build wires metrics, the CPU sampler, the Redis token service (when a
// clusterMode rule needs it), the gateway with cfg loaded, its reloader and
// the admin server; start runs their goroutines, close releases the rest.
// fl is the rules source cfg's document came from (nil: none); the
// instance owns it from here on.
func build(o Options, cfg *config.Config, fl *fleet, log zerolog.Logger) (*Instance, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := admin.NewMetrics(reg)

	cpu := system.NewProcessCPU()
	refused := map[string]prometheus.Counter{}
	for _, c := range proxy.RefusedReasons() {
		refused[c] = metrics.ConnRefused(c)
	}
	deps := proxy.Deps{
		OnConnRefused: func(c string) { refused[c].Inc() },
		Log:           log,
		Observer:      func(res string) proxy.Observer { return metrics.Resource(res) },
		Upstreams:     upstreamObserver{metrics},
		CPU:           cpu,
		Forwarder:     o.Forwarder,
		StrictSNI:     cfg.TLS.StrictSNI,
		OnCircuit: func(res string, from, to circuit.State) {
			log.Warn().Str("resource", res).Str("from", from.String()).Str("to", to.String()).Msg("circuit breaker")
			metrics.CircuitState(res, int(to))
		},
	}
	inst := &Instance{opts: o, log: log, registry: reg, metrics: metrics, cpu: cpu, fleet: fl, stopDemo: func(context.Context) {},
		tlsMetrics: admin.NewTLSMetrics(reg, tlsedge.HandshakeReasons())}
	svc, err := newCluster(cfg, log, metrics)
	if err != nil {
		return nil, err
	}
	if svc != nil {
		inst.cluster, deps.Cluster = svc, svc
	}

	inst.proxy = proxy.New(deps)
	if err := admin.RegisterConnections(reg, inst.proxy.OpenConnections); err != nil {
		return nil, err
	}
	inst.reloader = newReloader(o, inst.proxy, log, metrics)
	inst.reloader.clusterOn = deps.Cluster != nil
	inst.reloader.fleet = fl
	if fl != nil {
		if err := admin.RegisterSourceMetrics(reg, inst.adminState, time.Now); err != nil {
			return nil, err
		}
	}
	if cfg.AdminListen() != "" {
		inst.admin = newAdmin(inst)
		inst.adminTimeouts.readHeader, inst.adminTimeouts.idle = cfg.Server.ReadHeaderTimeout.D(), cfg.Server.IdleTimeout.D()
		inst.adminTimeouts.send = cfg.Server.SendTimeout.D()
		inst.reloader.setToken = inst.admin.SetToken
		inst.reloader.setHosts = inst.admin.SetHosts
	}
	if err := inst.reloader.apply(cfg); err != nil {
		inst.close()
		return nil, errors.New("cannot build the gateway from the rules file")
	}
	if fl != nil {
		inst.reloader.logDocument(fl.started())
	}
	return inst, nil
}

// start runs the goroutines build's parts need until ctx ends: the CPU
// sampler, the cluster token service's Redis link, the admin API's history.
func (inst *Instance) start(ctx context.Context) {
	go inst.cpu.Run(ctx, time.Second)
	if inst.cluster != nil {
		go inst.cluster.Run(ctx)
	}
	if inst.admin != nil {
		go inst.admin.Run(ctx)
	}
}

// adminState is what the admin API shows: the rules in force, the TLS
// certificates' last error and the cluster token service's Redis.
func (inst *Instance) adminState() admin.State {
	var st admin.State
	if inst.certs == nil {
		st = inst.reloader.state()
	} else {
		st = inst.certs.state(inst.reloader.state)()
	}
	if inst.cluster != nil {
		st.Cluster = inst.cluster.Status()
	}
	st.Draining = inst.draining.Load()
	return st
}

// close stops what build started that start's ctx does not stop.
func (inst *Instance) close() {
	inst.proxy.Close() // the upstreams' health probes
	if inst.cluster != nil {
		inst.cluster.Close()
	}
	if inst.fleet != nil {
		inst.fleet.close()
	}
}

// newCluster makes the Redis token service when a rule needs it, or when
// cluster names a Redis, so that a clusterMode rule a reload or a fleet push
// brings later is counted in Redis at once; start runs it.
func newCluster(cfg *config.Config, log zerolog.Logger, m *admin.Metrics) (*cluster.Service, error) {
	if !cfg.HasClusterRules() && cfg.Cluster.RedisTarget.Form() == config.RedisFormNone {
		return nil, nil
	}
	svc, err := cluster.New(clusterOptions(cfg, log, m))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	// go-redis reports failed dials through its own process-wide logger,
	// once per dial; the Service already logs each state change once.
	redis.SetLogger(redisLog{log})
	return svc, nil
}

func clusterOptions(cfg *config.Config, log zerolog.Logger, m *admin.Metrics) cluster.Options {
	var unanswered [len(cluster.Causes)]prometheus.Counter
	for i, c := range cluster.Causes {
		unanswered[i] = m.ClusterUnanswered(c.String())
	}
	return cluster.Options{
		OnUnanswered: func(c cluster.Cause) { unanswered[c].Inc() },
		Redis:        cfg.Cluster.RedisTarget,
		Namespace:    cfg.Cluster.Namespace,
		Timeout:      cfg.Cluster.Timeout.D(),
		Log:          log,
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
var _ hotparam.Forgetter = (*cluster.Service)(nil)
var _ hotparam.Reader = (*cluster.Service)(nil)

// EnvAdminToken names the environment variable whose token wins over
// admin.token; run reads it once, since a process's environment does not
// change under it.
const EnvAdminToken = "SLUICE_ADMIN_TOKEN"
