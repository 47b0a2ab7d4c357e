package config

import (
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Defaults of settings that a file may leave out (docs/configuration.md,
// docs/rules.md).
const (
	DefaultLogLevel         = "info"
	DefaultEntrance         = "default"
	DefaultForwarder        = "auto"
	DefaultOccupyTimeoutMs  = 500
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
	// DefaultClusterTimeout is Sentinel's and Envoy ratelimit's default:
	// a token server slower than that costs more latency than local
	// limiting saves.
	DefaultClusterTimeout   = 20 * time.Millisecond
	DefaultParamDurationSec = 1
	// DefaultMaxQueueingTimeMs is a flow rule's: Sentinel's FlowRule
	// default, and SPEC §3's. A param rule's is 0, as Sentinel's
	// ParamFlowRule.
	DefaultMaxQueueingTimeMs = 500
	// DefaultTimezone is the zone a calendar quota counts days in.
	DefaultTimezone   = "UTC"
	maxStatIntervalMs = 3_600_000
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

// Defaults gives cfg, built in code rather than read from a file, the
// defaults Load gives a file: every field left at its zero value (or nil)
// is taken as a key the file left out. It is the one place where rules
// built by hand get their defaults; the packages that compile rules
// (limiter, hotparam, limiter/circuit, cluster, proxy) take them as they
// are. A field whose default is not zero cannot be set to zero through
// Defaults (retryBudget, passive.consecutiveFailures, a flow rule's
// maxQueueingTimeMs): set it after.
// Defaults does not validate; an invalid value stays as it is.
func Defaults(cfg *Config) {
	d := &decoder{set: map[string]bool{}, lines: map[string]int{}}
	markSet(d.set, reflect.ValueOf(cfg).Elem(), "")
	c := &checker{decoder: d, cfg: cfg}
	c.applyAllDefaults()
}

// markSet marks as set every path under v (a field path as the decoder
// writes it) that holds a non-zero value.
func markSet(set map[string]bool, v reflect.Value, path string) {
	if v.IsZero() {
		return
	}
	if path != "" {
		set[path] = true
	}
	switch v.Kind() {
	case reflect.Pointer:
		markSet(set, v.Elem(), path)
	case reflect.Struct:
		for name, i := range yamlFields(v.Type()) {
			markSet(set, v.FieldByIndex(i), join(path, name))
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			markSet(set, it.Value(), join(path, it.Key().String()))
		}
	case reflect.Slice:
		for i := range v.Len() {
			markSet(set, v.Index(i), idx(path, i))
		}
	}
}

// applyAllDefaults fills every setting the file (or a Config built in
// code, see Defaults) left out.
func (c *checker) applyAllDefaults() {
	c.applyDefaults()
	c.applyEdgeDefaults()
	c.applyUpstreamDefaults()
	c.applyServerDefaults()
}

// setLines records the line of each rule, for errors and the admin API.
func (c *checker) setLines() {
	cfg := c.cfg
	for i := range cfg.Routes {
		cfg.Routes[i].Line = c.lines[idx("routes", i)]
	}
	for i := range cfg.APIGroups {
		cfg.APIGroups[i].Line = c.lines[idx("apiGroups", i)]
	}
	for i := range cfg.FlowRules {
		cfg.FlowRules[i].Line = c.lines[idx("flowRules", i)]
	}
	for i := range cfg.ParamRules {
		cfg.ParamRules[i].Line = c.lines[idx("paramRules", i)]
	}
	for i := range cfg.DegradeRules {
		cfg.DegradeRules[i].Line = c.lines[idx("degradeRules", i)]
	}
	for i := range cfg.TLS.Certificates {
		cfg.TLS.Certificates[i].Line = c.lineOf(idx("tls.certificates", i))
	}
	if cfg.TLS.ClientCAFile != "" {
		cfg.TLS.ClientCAFileLine = c.lineOf("tls.clientCAFile")
	}
}

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
	for i := range cfg.Routes {
		r, p := &cfg.Routes[i], idx("routes", i)
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
		if !c.has(p + ".occupyTimeoutMs") {
			r.OccupyTimeoutMs = DefaultOccupyTimeoutMs
		}
		if !c.has(p + ".methods") {
			r.Methods = append([]string(nil), httpMethods...)
		}
		for j, m := range r.Methods {
			r.Methods[j] = strings.ToUpper(m)
		}
	}
	for i := range cfg.AuthorityRules {
		r, p := &cfg.AuthorityRules[i], idx("authorityRules", i)
		r.Line = c.lines[p]
		if !c.has(p + ".strategy") {
			r.Strategy = AuthorityWhite // Sentinel's default
		}
	}
	for i := range cfg.FlowRules {
		r, p := &cfg.FlowRules[i], idx("flowRules", i)
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
		if !c.has(p + ".maxQueueingTimeMs") {
			r.MaxQueueingTimeMs = DefaultMaxQueueingTimeMs
		}
		if !c.has(p + ".statIntervalMs") {
			r.StatIntervalMs = DefaultStatIntervalMs
		}
		if !c.has(p + ".clusterConfig.thresholdType") {
			r.ClusterConfig.ThresholdType = ThresholdGlobal
		}
		defaultTrue(&r.ClusterConfig.FallbackToLocalWhenFail)
	}
	for i := range cfg.ParamRules {
		r, p := &cfg.ParamRules[i], idx("paramRules", i)
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
		if !c.has(p + ".window") {
			r.Window = WindowRolling
		}
		if !c.has(p + ".timezone") {
			r.Timezone = DefaultTimezone
		}
		if !c.has(p + ".countOn") {
			r.CountOn = CountOnRequest
		}
		if !c.has(p + ".clusterConfig.thresholdType") {
			r.ClusterConfig.ThresholdType = ThresholdGlobal
		}
		defaultTrue(&r.ClusterConfig.FallbackToLocalWhenFail)
	}
	for i := range cfg.DegradeRules {
		r, p := &cfg.DegradeRules[i], idx("degradeRules", i)
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
	defaultTrue(&b.RateLimitHeaders)
	c.applyRouteDefaults()
	if !c.has("cluster.namespace") {
		cfg.Cluster.Namespace = DefaultClusterNamespace
	}
	if !c.has("cluster.timeout") {
		cfg.Cluster.Timeout = Duration(DefaultClusterTimeout)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// defaultTrue sets an unwritten switch whose default is on, so that GET
// /api/rules shows true rather than null ("defaults filled in").
func defaultTrue(b **bool) {
	if *b == nil {
		t := true
		*b = &t
	}
}
