package admin

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Block reasons that have their own label value; any other reason passed to
// Block is counted under reasonUnknown so request data can never mint labels.
const (
	reasonFlow    = "flow"
	reasonParam   = "param"
	reasonDegrade = "degrade"
	reasonSystem  = "system"
	reasonDryRun  = "dryrun"
	reasonUnknown = "unknown"
)

// Metrics holds sluice's Prometheus collectors. Label values come only from
// the names its callers pass to Resource and CircuitState (configured resource
// names) and from a fixed set of results and reasons, never from request data,
// so the number of series is bounded by the configuration.
//
// Build it with NewMetrics; the zero Metrics is not usable. All methods are
// safe for concurrent use.
type Metrics struct {
	requests   *prometheus.CounterVec   // resource, result
	blocked    *prometheus.CounterVec   // resource, reason
	duration   *prometheus.HistogramVec // resource, result
	reloads    *prometheus.CounterVec   // result
	lastReload prometheus.Gauge
	circuit    *prometheus.GaugeVec // resource
	clusterUp  *prometheus.GaugeVec // form, master
	redisMu    sync.Mutex           // orders ClusterRedis calls; guards redisSeen
	redisSeen  map[[2]string]bool   // the series ClusterRedis set last
	up         upstreamMetrics
}

// NewMetrics creates the collectors and registers them on reg (nil: not
// registered). It panics if reg already holds collectors of the same names,
// a wiring mistake found at start-up.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_requests_total",
			Help: "Requests per resource by result: pass, block or error (upstream 5xx, transport failure or timeout).",
		}, []string{"resource", "result"}),
		blocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_blocked_total",
			Help: "Blocked requests per resource by reason (flow, param, degrade, system); dryrun counts would-be blocks that passed.",
		}, []string{"resource", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_request_duration_seconds",
			Help: "Time from the request reaching sluice to its answer, per resource and result.",
			// From a fast local block (sub-millisecond) to a slow upstream.
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"resource", "result"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rules_reloads_total",
			Help: "Reloads of rules.yaml by result (ok or failed).",
		}, []string{"result"}),
		lastReload: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_rules_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful load of rules.yaml.",
		}),
		circuit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_circuit_state",
			Help: "Circuit breaker state per resource: 0 closed, 1 open, 2 half-open.",
		}, []string{"resource"}),
		clusterUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_cluster_redis_up",
			Help: "Per master node of the Redis that cluster rules count in: 1 when it answers (for a Redis Cluster, each shard's master on its own), else 0. form is redis, sentinel or cluster; master is the node's host:port.",
		}, []string{"form", "master"}),
		up: newUpstreamMetrics(),
	}
	// Both results exist from the start so rate() and alerts see a 0, not a gap.
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("failed")
	if reg != nil {
		reg.MustRegister(m.requests, m.blocked, m.duration, m.reloads, m.lastReload, m.circuit, m.clusterUp)
		reg.MustRegister(m.up.collectors()...)
	}
	return m
}

// Resource returns the counters of one configured resource, resolved once so
// that the per-request calls only add to atomics. Call it when a rules
// snapshot is built, with the resource names of the configuration only;
// calling it again with the same name returns counters over the same series.
func (m *Metrics) Resource(name string) *ResourceMetrics {
	r := &ResourceMetrics{m: m, name: name}
	r.pass = m.requests.WithLabelValues(name, "pass")
	r.block = m.requests.WithLabelValues(name, "block")
	r.err = m.requests.WithLabelValues(name, "error")
	r.passDur = m.duration.WithLabelValues(name, "pass")
	r.blockDur = m.duration.WithLabelValues(name, "block")
	r.errDur = m.duration.WithLabelValues(name, "error")
	r.flow = m.blocked.WithLabelValues(name, reasonFlow)
	r.param = m.blocked.WithLabelValues(name, reasonParam)
	r.degrade = m.blocked.WithLabelValues(name, reasonDegrade)
	r.system = m.blocked.WithLabelValues(name, reasonSystem)
	r.dryRun = m.blocked.WithLabelValues(name, reasonDryRun)
	return r
}

// Reload counts one reload attempt; a successful one also sets the last
// success timestamp to at.
func (m *Metrics) Reload(ok bool, at time.Time) {
	if !ok {
		m.reloads.WithLabelValues("failed").Inc()
		return
	}
	m.reloads.WithLabelValues("ok").Inc()
	m.lastReload.Set(float64(at.UnixNano()) / 1e9)
}

// CircuitState sets a resource's breaker state: 0 closed, 1 open, 2 half-open.
// resource must be a configured name.
func (m *Metrics) CircuitState(resource string, state int) {
	m.circuit.WithLabelValues(resource).Set(float64(state))
}

// RedisMaster is one master node of the cluster token service's Redis.
type RedisMaster struct {
	Addr string
	Up   bool
}

// ClusterRedis sets sluice_cluster_redis_up: one series per master node,
// labelled with the form naming the Redis; a master no longer listed (the
// old master after a failover) loses its series. Label values come from
// the configuration and from the Redis deployment, never from requests.
func (m *Metrics) ClusterRedis(form string, masters []RedisMaster) {
	m.redisMu.Lock()
	defer m.redisMu.Unlock()
	now := make(map[[2]string]bool, len(masters))
	for _, ms := range masters {
		v := 0.0
		if ms.Up {
			v = 1
		}
		m.clusterUp.WithLabelValues(form, ms.Addr).Set(v)
		now[[2]string{form, ms.Addr}] = true
	}
	for k := range m.redisSeen {
		if !now[k] {
			m.clusterUp.DeleteLabelValues(k[0], k[1])
		}
	}
	m.redisSeen = now
}

// ResourceMetrics are one resource's pre-resolved series. Its methods do not
// allocate and are safe for concurrent use; a nil *ResourceMetrics ignores
// every call, so a route without metrics needs no branch.
type ResourceMetrics struct {
	m    *Metrics
	name string

	pass, block, err             prometheus.Counter
	passDur, blockDur, errDur    prometheus.Observer
	flow, param, degrade, system prometheus.Counter
	dryRun                       prometheus.Counter
}

// Pass counts a call that was let through and answered, and its duration.
func (r *ResourceMetrics) Pass(elapsed time.Duration) {
	if r == nil {
		return
	}
	r.pass.Inc()
	r.passDur.Observe(elapsed.Seconds())
}

// Block counts a refused call under result="block" and under its reason
// (flow, param, degrade or system; anything else counts as "unknown").
func (r *ResourceMetrics) Block(reason string, elapsed time.Duration) {
	if r == nil {
		return
	}
	r.block.Inc()
	r.blockDur.Observe(elapsed.Seconds())
	switch reason {
	case reasonFlow:
		r.flow.Inc()
	case reasonParam:
		r.param.Inc()
	case reasonDegrade:
		r.degrade.Inc()
	case reasonSystem:
		r.system.Inc()
	default:
		// A caller bug, not a request's doing: one fixed extra label value.
		r.m.blocked.WithLabelValues(r.name, reasonUnknown).Inc()
	}
}

// DryRun counts a call a dryRun rule would have blocked; the call passed and
// is counted by Pass or Error as well.
func (r *ResourceMetrics) DryRun() {
	if r == nil {
		return
	}
	r.dryRun.Inc()
}

// Error counts a call that was let through but failed upstream (5xx,
// transport failure or timeout), and its duration.
func (r *ResourceMetrics) Error(elapsed time.Duration) {
	if r == nil {
		return
	}
	r.err.Inc()
	r.errDur.Observe(elapsed.Seconds())
}

// concurrencyCollector reports sluice_concurrency{resource} from the
// limiter's own counts at scrape time, so no per-request gauge update is needed.
type concurrencyCollector struct {
	desc  *prometheus.Desc
	stats func() []ResourceStats
}

var _ prometheus.Collector = (*concurrencyCollector)(nil)

func newConcurrencyCollector(stats func() []ResourceStats) *concurrencyCollector {
	return &concurrencyCollector{
		desc: prometheus.NewDesc("sluice_concurrency",
			"Calls in flight per resource now.", []string{"resource"}, nil),
		stats: stats,
	}
}

func (c *concurrencyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *concurrencyCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.stats()
	seen := make(map[string]bool, len(stats))
	for _, s := range stats {
		// A repeated name would make the whole scrape fail.
		if seen[s.Resource] {
			continue
		}
		seen[s.Resource] = true
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(s.Concurrency), s.Resource)
	}
}
