package admin

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Block reasons that have their own label value; any other reason passed to
// Block is counted under reasonUnknown so request data can never mint labels.
const (
	reasonFlow      = "flow"
	reasonParam     = "param"
	reasonDegrade   = "degrade"
	reasonSystem    = "system"
	reasonAuthority = "authority"
	reasonDryRun    = "dryrun"
	reasonUnknown   = "unknown"
)

// Metrics holds sluice's Prometheus collectors. Label values come only from
// the names its callers pass to Resource and CircuitState (configured resource
// names) and from a fixed set of results and reasons, never from request data,
// so the number of series is bounded by the configuration; RetainResources
// and RetainCircuits drop the series of names a reload removed, so it is
// bounded by the configuration in force.
//
// Build it with NewMetrics; the zero Metrics is not usable. All methods are
// safe for concurrent use.
type Metrics struct {
	resources   *resourceCollector     // requests, blocked, duration: resource, result|reason
	reloads     *prometheus.CounterVec // result
	lastReload  prometheus.Gauge
	circuit     *prometheus.GaugeVec   // resource
	circuitMu   sync.Mutex             // guards circuitSeen, and orders it with circuit's series
	circuitSeen map[string]bool        // the resources circuit has a series of
	clusterUp   *prometheus.GaugeVec   // form, master
	unanswered  *prometheus.CounterVec // cause
	connRefused *prometheus.CounterVec // reason
	redisMu     sync.Mutex             // orders ClusterRedis calls; guards redisSeen
	redisSeen   map[[2]string]bool     // the series ClusterRedis set last
	up          upstreamMetrics
}

// NewMetrics creates the collectors and registers them on reg (nil: not
// registered). It panics if reg already holds collectors of the same names,
// a wiring mistake found at start-up.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		resources: newResourceCollector(),
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
		unanswered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_cluster_unanswered_total",
			Help: "Calls of cluster rules that Redis did not decide, which the rule's fallback then decided (locally, or by letting the call pass), by cause: down (the breaker is open: not sent), timeout (no answer within cluster.timeout) or error.",
		}, []string{"cause"}),
		connRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_connections_refused_total",
			Help: "Client connections the gateway closed, by reason: maxConnections or maxConnectionsPerIP (the server section's caps, closed as they were accepted), penalized (closed as they were accepted: the peer reset streams or flooded in the last 10 s), prematureResets (an HTTP/2 connection most of whose streams were reset before their answer), or flood (over 8 MiB read while none of its requests was being served).",
		}, []string{"reason"}),
		circuitSeen: map[string]bool{},
		up:          newUpstreamMetrics(),
	}
	// Both results exist from the start so rate() and alerts see a 0, not a gap.
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("failed")
	if reg != nil {
		reg.MustRegister(m.resources, m.reloads, m.lastReload, m.circuit, m.clusterUp, m.unanswered, m.connRefused)
		reg.MustRegister(m.up.collectors()...)
	}
	return m
}

// Resource returns the counters of one configured resource, resolved once so
// that the per-request calls only add to atomics. Call it when a rules
// snapshot is built, with the resource names of the configuration only;
// calling it again with the same name returns counters over the same series.
// Every series of the resource exists from this call on (at 0), so rate()
// and alerts see a 0, not a gap.
func (m *Metrics) Resource(name string) *ResourceMetrics {
	return m.resources.get(name)
}

// RetainResources drops the series of every resource Resource was called
// with that is not in names: call it after each reload with the names the
// rules in force use (a route's resource, an API group), as upstream
// targets' series go with ForgetTarget. A call still in flight on the old
// rules counts into a ResourceMetrics no longer exported; a name that comes
// back later starts its series again from 0, a counter reset rate() takes.
func (m *Metrics) RetainResources(names []string) {
	m.resources.retain(names)
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
	m.circuitMu.Lock()
	defer m.circuitMu.Unlock()
	m.circuit.WithLabelValues(resource).Set(float64(state))
	m.circuitSeen[resource] = true
}

// RetainCircuits drops the sluice_circuit_state series of every resource
// not in resources (those with degrade rules in force): a resource whose
// rules a reload removed reports closed once, then nothing, and would
// otherwise show closed for ever.
func (m *Metrics) RetainCircuits(resources []string) {
	m.circuitMu.Lock()
	defer m.circuitMu.Unlock()
	forgetAbsent(m.circuitSeen, resources, func(r string) { m.circuit.DeleteLabelValues(r) })
}

// forgetAbsent deletes from m every key not in names, calling gone with it
// first (nil: nothing).
func forgetAbsent[V any](m map[string]V, names []string, gone func(string)) {
	keep := make(map[string]bool, len(names))
	for _, n := range names {
		keep[n] = true
	}
	for k := range m {
		if !keep[k] {
			if gone != nil {
				gone(k)
			}
			delete(m, k)
		}
	}
}

// RedisMaster is one master node of the cluster token service's Redis.
type RedisMaster struct {
	Addr string
	Up   bool
}

// ClusterUnanswered is cause's counter of sluice_cluster_unanswered_total,
// made at once, so that the series reads 0 before the first such call;
// the caller keeps it, and counts without a label lookup.
func (m *Metrics) ClusterUnanswered(cause string) prometheus.Counter {
	return m.unanswered.WithLabelValues(cause)
}

// ConnRefused is reason's counter of sluice_connections_refused_total, made
// at once (the series reads 0 before the first refusal); the caller keeps it.
func (m *Metrics) ConnRefused(reason string) prometheus.Counter {
	return m.connRefused.WithLabelValues(reason)
}

// RegisterConnections registers sluice_connections_open on reg, read from
// open at each scrape.
func RegisterConnections(reg prometheus.Registerer, open func() int64) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_connections_open",
		Help: "Client connections open on the traffic listeners (plain and TLS), which server.maxConnections caps.",
	}, func() float64 { return float64(open()) }))
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

// ResourceMetrics are one resource's series. Its methods do not allocate and
// are safe for concurrent use; a nil *ResourceMetrics ignores every call, so
// a route without metrics needs no branch.
//
// They are plain atomics that the collector reads at scrape time rather than
// client_golang's counters and histograms: those cost about 8 KiB a resource,
// 80 MB for a document of 10,000 routes, these about 500 bytes.
type ResourceMetrics struct {
	name    string
	results [numResults]atomic.Uint64
	reasons [numReasons]atomic.Uint64
	dur     [numResults]histogram
	// tooLarge counts requests answered 413 (maxBodyBytes).
	tooLarge atomic.Uint64
	waits    atomic.Uint64 // prioritized calls that waited for a reserved pass
}

// Results and reasons, as indexes into ResourceMetrics' arrays.
const (
	resultPass = iota
	resultBlock
	resultError
	numResults
)

var resultNames = [numResults]string{"pass", "block", "error"}

const (
	idxFlow = iota
	idxParam
	idxDegrade
	idxSystem
	idxAuthority
	idxDryRun
	idxUnknown
	numReasons
)

var reasonNames = [numReasons]string{reasonFlow, reasonParam, reasonDegrade, reasonSystem, reasonAuthority, reasonDryRun, reasonUnknown}

// Pass counts a call that was let through and answered, and its duration.
func (r *ResourceMetrics) Pass(elapsed time.Duration) {
	if r == nil {
		return
	}
	r.results[resultPass].Add(1)
	r.dur[resultPass].observe(elapsed.Seconds())
}

// Block counts a refused call under result="block" and under its reason
// (flow, param, degrade, system or authority; anything else counts as
// "unknown").
func (r *ResourceMetrics) Block(reason string, elapsed time.Duration) {
	if r == nil {
		return
	}
	r.results[resultBlock].Add(1)
	r.dur[resultBlock].observe(elapsed.Seconds())
	switch reason {
	case reasonFlow:
		r.reasons[idxFlow].Add(1)
	case reasonParam:
		r.reasons[idxParam].Add(1)
	case reasonDegrade:
		r.reasons[idxDegrade].Add(1)
	case reasonSystem:
		r.reasons[idxSystem].Add(1)
	case reasonAuthority:
		r.reasons[idxAuthority].Add(1)
	default:
		// A caller bug, not a request's doing: one fixed extra label value,
		// exported once it is counted.
		r.reasons[idxUnknown].Add(1)
	}
}

// DryRun counts a call a dryRun rule would have blocked; the call passed and
// is counted by Pass or Error as well.
func (r *ResourceMetrics) DryRun() {
	if r == nil {
		return
	}
	r.reasons[idxDryRun].Add(1)
}

// TooLarge counts a request answered 413 because its body passed the
// route's maxBodyBytes (sluice_body_too_large_total). One refused by its
// Content-Length is counted here only; one whose stream passed the cap
// had passed the rules and is counted by Pass too.
func (r *ResourceMetrics) TooLarge() {
	if r == nil {
		return
	}
	r.tooLarge.Add(1)
}

// PrioritizedWait counts a prioritized call that waits for a pass reserved
// ahead (sluice_prioritized_waits_total); the call is counted by Pass,
// Error or nothing (its client left) as well.
func (r *ResourceMetrics) PrioritizedWait() {
	if r == nil {
		return
	}
	r.waits.Add(1)
}

// Error counts a call that was let through but failed upstream (5xx,
// transport failure or timeout), and its duration.
func (r *ResourceMetrics) Error(elapsed time.Duration) {
	if r == nil {
		return
	}
	r.results[resultError].Add(1)
	r.dur[resultError].observe(elapsed.Seconds())
}

// durationBuckets are sluice_request_duration_seconds' upper bounds: from a
// fast local block (sub-millisecond) to a slow upstream.
var durationBuckets = [...]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// histogram is one duration histogram: a count per bucket (the last one
// past the largest bound) and the sum of the observations.
type histogram struct {
	counts  [len(durationBuckets) + 1]atomic.Uint64
	sumBits atomic.Uint64
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(durationBuckets) && v > durationBuckets[i] {
		i++
	}
	h.counts[i].Add(1)
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// read returns the count, the sum and the cumulative bucket counts; the
// count is the buckets' total, so the three agree even while calls observe.
func (h *histogram) read() (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(durationBuckets))
	for i, ub := range durationBuckets {
		count += h.counts[i].Load()
		buckets[ub] = count
	}
	count += h.counts[len(durationBuckets)].Load()
	return count, math.Float64frombits(h.sumBits.Load()), buckets
}

// resourceCollector exports every resource's series at scrape time:
// sluice_requests_total, sluice_blocked_total,
// sluice_request_duration_seconds and sluice_body_too_large_total. A
// resource keeps its series from its first get until a retain leaves it
// out.
type resourceCollector struct {
	requests, blocked, duration, tooLarge, waits *prometheus.Desc

	mu     sync.RWMutex
	byName map[string]*ResourceMetrics
}

var _ prometheus.Collector = (*resourceCollector)(nil)

func newResourceCollector() *resourceCollector {
	return &resourceCollector{
		requests: prometheus.NewDesc("sluice_requests_total",
			"Requests per resource by result: pass, block or error (upstream 5xx, transport failure or timeout).",
			[]string{"resource", "result"}, nil),
		blocked: prometheus.NewDesc("sluice_blocked_total",
			"Blocked requests per resource by reason (flow, param, degrade, system, authority); dryrun counts would-be blocks that passed.",
			[]string{"resource", "reason"}, nil),
		duration: prometheus.NewDesc("sluice_request_duration_seconds",
			"Time from the request reaching sluice to its answer, per resource and result.",
			[]string{"resource", "result"}, nil),
		tooLarge: prometheus.NewDesc("sluice_body_too_large_total",
			"Requests per resource answered 413: the request body was over maxBodyBytes.",
			[]string{"resource"}, nil),
		waits: prometheus.NewDesc("sluice_prioritized_waits_total",
			"Prioritized calls per resource that waited for a pass reserved ahead instead of being blocked (routes' prioritized); exported once one has.",
			[]string{"resource"}, nil),
		byName: map[string]*ResourceMetrics{},
	}
}

func (c *resourceCollector) get(name string) *ResourceMetrics {
	c.mu.RLock()
	r := c.byName[name]
	c.mu.RUnlock()
	if r != nil {
		return r
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r = c.byName[name]; r == nil {
		r = &ResourceMetrics{name: name}
		c.byName[name] = r
	}
	return r
}

// retain forgets every resource not in names.
func (c *resourceCollector) retain(names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	forgetAbsent(c.byName, names, nil)
}

func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.blocked
	ch <- c.duration
	ch <- c.tooLarge
	ch <- c.waits
}

func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	rs := make([]*ResourceMetrics, 0, len(c.byName))
	for _, r := range c.byName {
		rs = append(rs, r)
	}
	c.mu.RUnlock()
	for _, r := range rs {
		ch <- prometheus.MustNewConstMetric(c.tooLarge, prometheus.CounterValue, float64(r.tooLarge.Load()), r.name)
		for i := range numResults {
			ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(r.results[i].Load()), r.name, resultNames[i])
			count, sum, buckets := r.dur[i].read()
			ch <- prometheus.MustNewConstHistogram(c.duration, count, sum, buckets, r.name, resultNames[i])
		}
		for i := range numReasons {
			n := r.reasons[i].Load()
			if i == idxUnknown && n == 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.blocked, prometheus.CounterValue, float64(n), r.name, reasonNames[i])
		}
		if n := r.waits.Load(); n > 0 {
			ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(n), r.name)
		}
	}
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
