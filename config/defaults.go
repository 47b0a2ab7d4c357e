package config

import (
	"strconv"
	"strings"
	"time"
)

// Defaults of settings that a file may leave out (docs/configuration.md,
// docs/rules.md).
const (
	DefaultLogLevel         = "info"
	DefaultLogFormat        = "json"
	DefaultEntrance         = "default"
	DefaultForwarder        = "auto"
	DefaultUpstreamTimeout  = 30 * time.Second
	DefaultWarmUpPeriodSec  = 10
	DefaultColdFactor       = 3
	DefaultStatIntervalMs   = 1000
	DefaultMaxTrackedValues = 100000
	DefaultMinRequestAmount = 5
	DefaultRetryTimeoutMs   = 5000
	DefaultProbeNum         = 1
	DefaultBlockStatus      = 429
	DefaultBlockContentType = "application/json"
	DefaultBlockBody        = `{"error":"blocked","resource":"{{.Resource}}","reason":"{{.Reason}}"}`
	DefaultClusterNamespace = "sluice"
	DefaultParamDurationSec = 1
	maxStatIntervalMs       = 3_600_000
)

// checker applies defaults and validates a decoded Config, adding its
// findings to the decoder's errors.
type checker struct {
	*decoder
	cfg *Config
}

// has reports whether the file gave path a (non-null) value.
func (c *checker) has(path string) bool { return c.set[path] }

// idx returns "base[i]".
func idx(base string, i int) string { return base + "[" + strconv.Itoa(i) + "]" }

// applyDefaults fills every setting the file left out. It runs before
// validation so that validation sees the values the gateway will use; an
// explicit value (even 0 or "") is kept and validated.
func (c *checker) applyDefaults() {
	cfg := c.cfg
	if !c.has("listen") {
		cfg.Listen = DefaultListen
	}
	if cfg.Admin.Listen == nil {
		s := DefaultAdminListen
		cfg.Admin.Listen = &s
	}
	if !c.has("log.level") {
		cfg.Log.Level = DefaultLogLevel
	}
	if !c.has("log.format") {
		cfg.Log.Format = DefaultLogFormat
	}
	for i := range cfg.Routes {
		r, p := &cfg.Routes[i], idx("routes", i)
		r.Line = c.lines[p]
		if !c.has(p + ".resource") {
			r.Resource = r.Path
		}
		if !c.has(p + ".entrance") {
			r.Entrance = DefaultEntrance
		}
		if !c.has(p + ".acquireCount") {
			r.AcquireCount = 1
		}
		if !c.has(p + ".forwarder") {
			r.Forwarder = DefaultForwarder
		}
		if !c.has(p + ".methods") {
			r.Methods = append([]string(nil), httpMethods...)
		}
		for j, m := range r.Methods {
			r.Methods[j] = strings.ToUpper(m)
		}
	}
	for i := range cfg.FlowRules {
		r, p := &cfg.FlowRules[i], idx("flowRules", i)
		r.Line = c.lines[p]
		if !c.has(p + ".limitApp") {
			r.LimitApp = LimitAppDefault
		}
		if !c.has(p + ".grade") {
			r.Grade = GradeQPS
		}
		if !c.has(p + ".strategy") {
			r.Strategy = StrategyDirect
		}
		if !c.has(p + ".controlBehavior") {
			r.ControlBehavior = BehaviorReject
		}
		if !c.has(p + ".warmUpPeriodSec") {
			r.WarmUpPeriodSec = DefaultWarmUpPeriodSec
		}
		if !c.has(p + ".coldFactor") {
			r.ColdFactor = DefaultColdFactor
		}
		if !c.has(p + ".statIntervalMs") {
			r.StatIntervalMs = DefaultStatIntervalMs
		}
		if !c.has(p + ".clusterConfig.thresholdType") {
			r.ClusterConfig.ThresholdType = ThresholdGlobal
		}
	}
	for i := range cfg.ParamRules {
		r, p := &cfg.ParamRules[i], idx("paramRules", i)
		r.Line = c.lines[p]
		if !c.has(p + ".grade") {
			r.Grade = GradeQPS
		}
		if !c.has(p + ".durationSec") {
			r.DurationSec = DefaultParamDurationSec
		}
		if !c.has(p + ".controlBehavior") {
			r.ControlBehavior = BehaviorReject
		}
		if !c.has(p + ".maxTrackedValues") {
			r.MaxTrackedValues = DefaultMaxTrackedValues
		}
	}
	for i := range cfg.DegradeRules {
		r, p := &cfg.DegradeRules[i], idx("degradeRules", i)
		r.Line = c.lines[p]
		if !c.has(p + ".statIntervalMs") {
			r.StatIntervalMs = DefaultStatIntervalMs
		}
		if !c.has(p + ".minRequestAmount") {
			r.MinRequestAmount = DefaultMinRequestAmount
		}
		if !c.has(p + ".retryTimeoutMs") {
			r.RetryTimeoutMs = DefaultRetryTimeoutMs
		}
		if !c.has(p + ".errorStatuses") {
			r.ErrorStatuses = DefaultErrorStatuses()
		}
		if !c.has(p + ".probeNum") {
			r.ProbeNum = DefaultProbeNum
		}
	}
	b := &cfg.BlockResponse
	if !c.has("blockResponse.status") {
		b.Status = DefaultBlockStatus
	}
	if !c.has("blockResponse.contentType") {
		b.ContentType = DefaultBlockContentType
	}
	if !c.has("blockResponse.body") {
		b.Body = DefaultBlockBody
	}
	if b.RateLimitHeaders == nil {
		t := true
		b.RateLimitHeaders = &t
	}
	if !c.has("cluster.namespace") {
		cfg.Cluster.Namespace = DefaultClusterNamespace
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
