package admin

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// UpstreamStats is one upstream now, as GET /api/upstreams shows it.
type UpstreamStats struct {
	Name    string `json:"name"`
	Balance string `json:"balance"`
	// Panic: no target is available, so every target gets traffic.
	Panic bool `json:"panic"`
	// RequestsPerSecond and RetriesPerSecond are client requests and their
	// retries over the last 10 s; over the last second, and no retries, for
	// an upstream that does not retry (upstream.UpstreamStatus).
	RequestsPerSecond float64       `json:"requestsPerSecond"`
	RetriesPerSecond  float64       `json:"retriesPerSecond"`
	Targets           []TargetStats `json:"targets"`
}

// TargetStats is one target of an upstream now.
type TargetStats struct {
	URL    string `json:"url"`
	Weight int    `json:"weight"`
	// Healthy is the active health checks' verdict (true without checks).
	Healthy bool `json:"healthy"`
	// EjectedUntil is set while passive ejection keeps the target out.
	EjectedUntil *time.Time `json:"ejectedUntil"`
	// Available: healthy and not ejected; balancing uses only these
	// (unless none is: panic mode).
	Available bool  `json:"available"`
	InFlight  int64 `json:"inFlight"`
	// Attempts sent to the target, those that failed and those that were
	// retries, per second over the last second.
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	ErrorsPerSecond   float64 `json:"errorsPerSecond"`
	RetriesPerSecond  float64 `json:"retriesPerSecond"`
}

func (s *Server) upstreams(w http.ResponseWriter, _ *http.Request) {
	ups := slices.Clone(s.opts.Upstreams())
	if ups == nil {
		ups = []UpstreamStats{}
	}
	writeJSON(w, http.StatusOK, struct {
		At        int64           `json:"at"`
		Upstreams []UpstreamStats `json:"upstreams"`
	}{s.opts.Now().UnixMilli(), ups})
}

// Upstream label values come from the configuration (upstream names and
// target URLs) and a fixed set of code classes, never from request data.
var codeClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx", "error"}

// upstreamMetrics are the sluice_upstream_* collectors.
type upstreamMetrics struct {
	requests   *prometheus.CounterVec // upstream, target, code
	retries    *prometheus.CounterVec // upstream
	ejections  *prometheus.CounterVec // upstream, target
	panicTotal *prometheus.CounterVec // upstream
}

func newUpstreamMetrics() upstreamMetrics {
	return upstreamMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_upstream_requests_total",
			Help: "Attempts sent to each upstream target (retries included) by the class of its answer: 1xx..5xx, or error for a transport failure (connect error, reset, timeout).",
		}, []string{"upstream", "target", "code"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_upstream_retries_total",
			Help: "Requests sent again after a failed attempt: to a target not yet tried first, then to one that was (a single target gets them all).",
		}, []string{"upstream"}),
		ejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_upstream_ejections_total",
			Help: "Times a target was ejected after failures in a row (passive health).",
		}, []string{"upstream", "target"}),
		panicTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_upstream_panic_total",
			Help: "Requests served in panic mode: no target of the upstream was available, so all of them were used.",
		}, []string{"upstream"}),
	}
}

func (u upstreamMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{u.requests, u.retries, u.ejections, u.panicTotal}
}

// UpstreamMetrics are one upstream's pre-resolved series. Safe for
// concurrent use; a nil one ignores every call.
type UpstreamMetrics struct {
	retries, panics prometheus.Counter
}

// Upstream returns the counters of a configured upstream.
func (m *Metrics) Upstream(name string) *UpstreamMetrics {
	return &UpstreamMetrics{retries: m.up.retries.WithLabelValues(name), panics: m.up.panicTotal.WithLabelValues(name)}
}

// Retried counts a request sent again.
func (u *UpstreamMetrics) Retried() {
	if u != nil {
		u.retries.Inc()
	}
}

// Panicked counts a request served in panic mode.
func (u *UpstreamMetrics) Panicked() {
	if u != nil {
		u.panics.Inc()
	}
}

// ForgetTarget drops the series of a target its upstream no longer has.
func (m *Metrics) ForgetTarget(upstream, target string) {
	for _, c := range codeClasses {
		m.up.requests.DeleteLabelValues(upstream, target, c)
	}
	m.up.ejections.DeleteLabelValues(upstream, target)
}

// ForgetUpstream drops the series of an upstream no longer configured
// (its targets' go with ForgetTarget).
func (m *Metrics) ForgetUpstream(name string) {
	m.up.retries.DeleteLabelValues(name)
	m.up.panicTotal.DeleteLabelValues(name)
}

// TargetMetrics are one target's pre-resolved series. Safe for concurrent
// use; a nil one ignores every call.
type TargetMetrics struct {
	codes    [len(codeClasses)]prometheus.Counter
	ejection prometheus.Counter
}

// Target returns the counters of a configured upstream's target.
func (m *Metrics) Target(upstream, target string) *TargetMetrics {
	t := &TargetMetrics{ejection: m.up.ejections.WithLabelValues(upstream, target)}
	for i, c := range codeClasses {
		t.codes[i] = m.up.requests.WithLabelValues(upstream, target, c)
	}
	return t
}

// Answered counts an attempt answered with code (0: a transport failure).
func (t *TargetMetrics) Answered(code int) {
	if t == nil {
		return
	}
	i := len(codeClasses) - 1 // error
	if code >= 100 && code < 600 {
		i = code/100 - 1
	}
	t.codes[i].Inc()
}

// Ejected counts an ejection.
func (t *TargetMetrics) Ejected() {
	if t != nil {
		t.ejection.Inc()
	}
}

// targetUpCollector reports sluice_upstream_target_up{upstream,target} from
// the upstreams' state at scrape time: 1 while the target takes traffic
// (healthy and not ejected), else 0.
type targetUpCollector struct {
	desc *prometheus.Desc
	ups  func() []UpstreamStats
}

var _ prometheus.Collector = (*targetUpCollector)(nil)

func newTargetUpCollector(ups func() []UpstreamStats) *targetUpCollector {
	return &targetUpCollector{
		desc: prometheus.NewDesc("sluice_upstream_target_up",
			"1 while the target is available (healthy and not ejected), else 0.", []string{"upstream", "target"}, nil),
		ups: ups,
	}
}

func (c *targetUpCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *targetUpCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]bool{}
	for _, u := range c.ups() {
		for _, t := range u.Targets {
			k := strconv.Quote(u.Name) + " " + t.URL
			if seen[k] {
				continue // a repeated pair would fail the whole scrape
			}
			seen[k] = true
			v := 0.0
			if t.Available {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, u.Name, t.URL)
		}
	}
}
