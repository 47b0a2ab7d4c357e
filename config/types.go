// Package config holds the rules.yaml schema, its strict decoding with file:line
// errors, defaults, validation and file watching.
//
// Layer 1 of docs/architecture.md: it imports only internal/ mechanisms
// (internal/ruleid, internal/calendar); every other sluice package may import it.
package config

import (
	"net/textproto"
	"strings"
	"time"

	"sluice/internal/calendar"
)

// Config is one decoded, defaulted and validated rules.yaml. A Config is never
// mutated after Load returns it; a reload produces a new one.
type Config struct {
	Listen         string              `yaml:"listen" json:"listen"`
	TLS            TLS                 `yaml:"tls" json:"tls"`
	HTTP2          HTTP2               `yaml:"http2" json:"http2"`
	Server         Server              `yaml:"server" json:"server"`
	Admin          Admin               `yaml:"admin" json:"admin"`
	Log            Log                 `yaml:"log" json:"log"`
	Origin         OriginConfig        `yaml:"origin" json:"origin"`
	TrustedProxies []string            `yaml:"trustedProxies" json:"trustedProxies"`
	Upstreams      map[string]Upstream `yaml:"upstreams" json:"upstreams"`
	Routes         []Route             `yaml:"routes" json:"routes"`
	APIGroups      []APIGroup          `yaml:"apiGroups" json:"apiGroups"`
	AuthorityRules []AuthorityRule     `yaml:"authorityRules" json:"authorityRules"`
	FlowRules      []FlowRule          `yaml:"flowRules" json:"flowRules"`
	ParamRules     []ParamRule         `yaml:"paramRules" json:"paramRules"`
	DegradeRules   []DegradeRule       `yaml:"degradeRules" json:"degradeRules"`
	System         System              `yaml:"system" json:"system"`
	Cluster        Cluster             `yaml:"cluster" json:"cluster"`
	BlockResponse  BlockResponse       `yaml:"blockResponse" json:"blockResponse"`
	RulesSource    RulesSource         `yaml:"rulesSource" json:"rulesSource"`

	// Path is the file this Config was read from (not part of the YAML).
	Path string `yaml:"-" json:"path"`
	// Document names the rules source's document merged into this Config
	// (RulesSource.Name), "" when none was (see ParseWithDocument).
	Document string `yaml:"-" json:"document,omitempty"`
}

// Admin configures the operators' listener.
type Admin struct {
	// Listen is nil when the key is absent (default applies) and "" when the
	// user turned the admin listener off.
	Listen *string `yaml:"listen" json:"listen"`
	Token  string  `yaml:"token" json:"-"`
	// Hosts are the Host names the listener answers to besides IP literals
	// and localhost (DNS rebinding guard): lower case, no trailing dot, a
	// leading "*." for every name under a domain.
	Hosts []string `yaml:"hosts" json:"hosts"`
}

// Log configures logging; command-line flags override it.
type Log struct {
	Level  string `yaml:"level" json:"level"`
	Format string `yaml:"format" json:"format"`
	Access bool   `yaml:"access" json:"access"`
}

// OriginConfig says where the caller's identity (Sentinel's origin) comes from.
type OriginConfig struct {
	From Source `yaml:"from" json:"from"`
	// Strip removes the origin header (when From is a header) before forwarding.
	Strip bool `yaml:"strip" json:"strip"`
}

// Upstream is a set of targets and how requests are spread over them,
// checked and retried (docs/upstreams.md).
type Upstream struct {
	Targets        []Target `yaml:"targets" json:"targets"`
	Timeout        Duration `yaml:"timeout" json:"timeout"`
	ConnectTimeout Duration `yaml:"connectTimeout" json:"connectTimeout"`
	// IdleTimeout closes a pooled keep-alive connection to a target idle
	// this long, on both forwarders: set it below the target's own
	// keep-alive timeout (Node's and uvicorn's 5 s) so that the gateway,
	// not the target, closes an idle connection, and never sends a
	// request on one the target is closing.
	IdleTimeout Duration `yaml:"idleTimeout" json:"idleTimeout"`
	// Balance is roundRobin, leastRequest or hash (on HashOn).
	Balance string `yaml:"balance" json:"balance"`
	HashOn  Source `yaml:"hashOn" json:"hashOn"`
	// HealthCheck is nil when the file has none; Passive is never nil
	// once loaded (on by default, off with ConsecutiveFailures 0).
	HealthCheck *HealthCheck `yaml:"healthCheck" json:"healthCheck"`
	Passive     *Passive     `yaml:"passive" json:"passive"`
	Retries     int          `yaml:"retries" json:"retries"`
	RetryBudget float64      `yaml:"retryBudget" json:"retryBudget"`
	// Protocol is how sluice speaks to the targets: http1, h2c or h2;
	// "" is http1 (see Proto).
	Protocol string `yaml:"protocol" json:"protocol"`
}

// Route maps a chi path pattern to an upstream and a resource.
type Route struct {
	Path         string   `yaml:"path" json:"path"`
	Hosts        []string `yaml:"hosts" json:"hosts"`
	Methods      []string `yaml:"methods" json:"methods"`
	Upstream     string   `yaml:"upstream" json:"upstream"`
	Resource     string   `yaml:"resource" json:"resource"`
	Entrance     string   `yaml:"entrance" json:"entrance"`
	StripPrefix  string   `yaml:"stripPrefix" json:"stripPrefix"`
	AcquireCount int64    `yaml:"acquireCount" json:"acquireCount"`
	Forwarder    string   `yaml:"forwarder" json:"forwarder"` // auto | standard | fast
	// MaxBodyBytes caps the request body (0: none); left out, it is
	// server.maxBodyBytes (defaults.go).
	MaxBodyBytes int64 `yaml:"maxBodyBytes" json:"maxBodyBytes"`
	// KeepCostHeaders lets the client see the headers whose figures the
	// resource's countOn responseHeader:NAME rules take (and its API
	// groups'); false: they are removed from every answer (SPEC §12).
	KeepCostHeaders bool `yaml:"keepCostHeaders" json:"keepCostHeaders"`
	// BlockResponse is what this route's blocked calls get: the top-level
	// blockResponse with the fields the route sets overriding it (merged
	// in defaults.go, so it is complete once loaded).
	BlockResponse BlockResponse `yaml:"blockResponse" json:"blockResponse"`
	// Prioritized calls that a qps reject rule would refuse wait up to
	// OccupyTimeoutMs for room instead (Sentinel's entryWithPriority).
	Prioritized     Priority `yaml:"prioritized" json:"prioritized"`
	OccupyTimeoutMs int64    `yaml:"occupyTimeoutMs" json:"occupyTimeoutMs"`

	Line int `yaml:"-" json:"line"` // line of the route in the file, for messages
}

// APIGroup is a Sentinel gateway API definition: one resource over many
// routes. A request is counted on its route's resource and on every group
// one of whose Match entries its normalized path satisfies; rules of every
// kind name a group as they name a route's resource. Its Name is neither a
// route's resource nor another group's (validation).
type APIGroup struct {
	Name  string     `yaml:"name" json:"name"`
	Match []APIMatch `yaml:"match" json:"match"`

	Line int `yaml:"-" json:"line"`
}

// APIMatch is one predicate on the normalized path (SPEC §11); exactly one
// field is set. Exact and Prefix are spelled like a route's path (and
// normalized as route patterns are); Regex is Go RE2 syntax on the escaped
// normalized path, anchored only where it says so.
type APIMatch struct {
	Exact  string `yaml:"exact" json:"exact,omitempty"`
	Prefix string `yaml:"prefix" json:"prefix,omitempty"`
	Regex  string `yaml:"regex" json:"regex,omitempty"`
}

// Grade is what a rule counts: passes per interval or requests in flight.
type Grade string

const (
	GradeQPS         Grade = "qps"
	GradeConcurrency Grade = "concurrency"
)

// Strategy selects the statistics node a flow rule is checked against.
type Strategy string

const (
	StrategyDirect Strategy = "direct"
	StrategyRelate Strategy = "relate"
	StrategyChain  Strategy = "chain"
)

// ControlBehavior is what a qps rule does at its threshold.
type ControlBehavior string

const (
	BehaviorReject         ControlBehavior = "reject"
	BehaviorWarmUp         ControlBehavior = "warmUp"
	BehaviorThrottle       ControlBehavior = "throttle"
	BehaviorWarmUpThrottle ControlBehavior = "warmUpThrottle"
)

// Special limitApp values.
const (
	LimitAppDefault = "default"
	LimitAppOther   = "other"
)

// FlowRule is Sentinel's FlowRule.
type FlowRule struct {
	Resource          string          `yaml:"resource" json:"resource"`
	LimitApp          string          `yaml:"limitApp" json:"limitApp"`
	Grade             Grade           `yaml:"grade" json:"grade"`
	Count             float64         `yaml:"count" json:"count"`
	Strategy          Strategy        `yaml:"strategy" json:"strategy"`
	RefResource       string          `yaml:"refResource" json:"refResource"`
	ControlBehavior   ControlBehavior `yaml:"controlBehavior" json:"controlBehavior"`
	WarmUpPeriodSec   int64           `yaml:"warmUpPeriodSec" json:"warmUpPeriodSec"`
	ColdFactor        float64         `yaml:"coldFactor" json:"coldFactor"`
	MaxQueueingTimeMs int64           `yaml:"maxQueueingTimeMs" json:"maxQueueingTimeMs"`
	BurstCount        int64           `yaml:"burstCount" json:"burstCount"` // throttle: permits stored while idle (Guava's SmoothBursty)
	StatIntervalMs    int64           `yaml:"statIntervalMs" json:"statIntervalMs"`
	DryRun            bool            `yaml:"dryRun" json:"dryRun"`
	ClusterMode       bool            `yaml:"clusterMode" json:"clusterMode"`
	ClusterConfig     ClusterConfig   `yaml:"clusterConfig" json:"clusterConfig"`

	Line int `yaml:"-" json:"line"`
}

// LimitApps splits LimitApp ("a, b") into its origins.
func (r FlowRule) LimitApps() []string { return splitList(r.LimitApp) }

// AuthorityStrategy says what an authority rule does with the callers it names.
type AuthorityStrategy string

const (
	// AuthorityWhite lets through only the callers the rule names.
	AuthorityWhite AuthorityStrategy = "white"
	// AuthorityBlack refuses exactly the callers the rule names.
	AuthorityBlack AuthorityStrategy = "black"
)

// AuthorityRule is Sentinel's AuthorityRule, with client addresses beside
// origins: it names callers by origin (LimitApp, a comma-separated list of
// origin.from values) and by address (IPs, CIDRs or single addresses of the
// ip source), and lets only them through (white) or refuses exactly them
// (black). A caller is named when its origin or its address is.
type AuthorityRule struct {
	Resource string            `yaml:"resource" json:"resource"`
	Strategy AuthorityStrategy `yaml:"strategy" json:"strategy"`
	LimitApp string            `yaml:"limitApp" json:"limitApp"`
	IPs      []string          `yaml:"ips" json:"ips"`

	Line int `yaml:"-" json:"line"`
}

// LimitApps splits LimitApp ("a, b") into its origins.
func (r AuthorityRule) LimitApps() []string { return splitList(r.LimitApp) }

// ThresholdType says whether a cluster rule's count is for the cluster or per gateway.
type ThresholdType string

const (
	ThresholdGlobal   ThresholdType = "global"
	ThresholdAvgLocal ThresholdType = "avgLocal"
)

// ClusterConfig is Sentinel's ClusterFlowConfig, reduced to what a Redis token
// service needs.
type ClusterConfig struct {
	ThresholdType ThresholdType `yaml:"thresholdType" json:"thresholdType"`
	// FallbackToLocalWhenFail is nil when unset; the default is true.
	FallbackToLocalWhenFail *bool `yaml:"fallbackToLocalWhenFail" json:"fallbackToLocalWhenFail"`
}

// Fallback reports whether the rule falls back to local limiting when Redis fails.
func (c ClusterConfig) Fallback() bool {
	return c.FallbackToLocalWhenFail == nil || *c.FallbackToLocalWhenFail
}

// ParamRule is Sentinel's ParamFlowRule.
type ParamRule struct {
	Resource string `yaml:"resource" json:"resource"`
	Param    Key    `yaml:"param" json:"param"`
	// Match limits the rule to the values that match it; the others pass
	// the rule untouched. The zero ParamMatch matches every value.
	Match             ParamMatch      `yaml:"match" json:"match,omitzero"`
	Grade             Grade           `yaml:"grade" json:"grade"`
	Count             float64         `yaml:"count" json:"count"`
	DurationSec       int64           `yaml:"durationSec" json:"durationSec"`
	BurstCount        int64           `yaml:"burstCount" json:"burstCount"`
	ControlBehavior   ControlBehavior `yaml:"controlBehavior" json:"controlBehavior"`
	MaxQueueingTimeMs int64           `yaml:"maxQueueingTimeMs" json:"maxQueueingTimeMs"`
	MaxTrackedValues  int             `yaml:"maxTrackedValues" json:"maxTrackedValues"`
	DryRun            bool            `yaml:"dryRun" json:"dryRun"`
	// Window is rolling (count per durationSec, the token bucket), or a
	// calendar quota: count per day or month in Timezone, reset at local
	// midnight or on the 1st (docs/rules.md#calendar-quotas). A quota is
	// kept in Redis, so it needs ClusterMode.
	Window Window `yaml:"window" json:"window"`
	// Timezone is the IANA zone a calendar window's days are counted in.
	Timezone string `yaml:"timezone" json:"timezone"`
	// ClusterMode counts each value across every gateway of the namespace
	// (docs/cluster.md): an exact sliding window of count per durationSec
	// in Redis, grade qps and controlBehavior reject only.
	ClusterMode   bool          `yaml:"clusterMode" json:"clusterMode"`
	ClusterConfig ClusterConfig `yaml:"clusterConfig" json:"clusterConfig"`
	// CountOn is when a call takes its tokens: request (as it enters),
	// failure (after the answer, only if its status is in FailureStatuses)
	// or responseHeader:NAME (after the answer, as many as the upstream's
	// NAME header says). See CountOn.
	CountOn CountOn `yaml:"countOn" json:"countOn"`
	// FailureStatuses are the answers that take tokens with countOn
	// failure: codes ("401") or classes ("4xx"), as ParseStatus reads them.
	FailureStatuses []string    `yaml:"failureStatuses" json:"failureStatuses"`
	Items           []ParamItem `yaml:"items" json:"items"`

	Line int `yaml:"-" json:"line"`
}

// CountOn is when a param rule's call takes its tokens (SPEC §12).
type CountOn string

const (
	// CountOnRequest: a call takes acquireCount tokens as it enters.
	CountOnRequest CountOn = "request"
	// CountOnFailure: a call is let in while its value has acquireCount
	// tokens left, and takes them after the answer if the answer's status
	// is in failureStatuses.
	CountOnFailure CountOn = "failure"
	// CountOnHeaderPrefix starts "responseHeader:NAME": a call is let in
	// while its value has a token left, and takes as many as the
	// upstream's NAME header says after the answer (acquireCount without
	// one), which may overdraw the value's bucket.
	CountOnHeaderPrefix = "responseHeader:"
)

// AfterAnswer reports whether the call's tokens are taken after the
// answer (failure, responseHeader:NAME) rather than as it enters.
func (c CountOn) AfterAnswer() bool { return c != "" && c != CountOnRequest }

// Header is the header NAME of responseHeader:NAME, canonicalised
// (x-tokens-used is X-Tokens-Used); "" for any other CountOn.
func (c CountOn) Header() string {
	name, ok := strings.CutPrefix(string(c), CountOnHeaderPrefix)
	if !ok {
		return ""
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

// ClusterRule returns the resource of the first clusterMode rule (flow
// rules, then param rules); ok is false when no rule needs the cluster.
func (c *Config) ClusterRule() (resource string, ok bool) {
	for _, r := range c.FlowRules {
		if r.ClusterMode {
			return r.Resource, true
		}
	}
	for _, r := range c.ParamRules {
		if r.ClusterMode {
			return r.Resource, true
		}
	}
	return "", false
}

// HasClusterRules reports whether a flow or param rule has clusterMode: the
// gateway then needs the Redis of cluster.
func (c *Config) HasClusterRules() bool {
	_, ok := c.ClusterRule()
	return ok
}

// Window is a param rule's kind of window.
type Window string

const (
	WindowRolling Window = "rolling"
	WindowDay     Window = "day"
	WindowMonth   Window = "month"
)

// Calendar reports whether w is a calendar quota (day or month) and its
// unit.
func (w Window) Calendar() (calendar.Unit, bool) {
	switch w {
	case WindowDay:
		return calendar.Day, true
	case WindowMonth:
		return calendar.Month, true
	}
	return 0, false
}

// Zone is the rule's Timezone as a location. The one validation refuses a
// Timezone it cannot load, so for a rule config gave, err is nil.
func (r *ParamRule) Zone() (*time.Location, error) {
	return time.LoadLocation(r.Timezone)
}

// ParamItem is an exception value with its own threshold: the value itself,
// or (with Match) every value that Value matches as a pattern, each value
// in its own bucket.
type ParamItem struct {
	Value string `yaml:"value" json:"value"`
	// Match is how Value is matched: "" or exact (the value itself), or a
	// class: prefix, contains, regex or cidr.
	Match MatchStrategy `yaml:"match" json:"match,omitempty"`
	Count float64       `yaml:"count" json:"count"`
}

// MatchStrategy is how a pattern is matched against a value (Sentinel
// gateway's matchStrategy, and cidr).
type MatchStrategy string

const (
	MatchExact    MatchStrategy = "exact"
	MatchPrefix   MatchStrategy = "prefix"
	MatchContains MatchStrategy = "contains"
	MatchRegex    MatchStrategy = "regex" // Go RE2, anchored only if the pattern says so
	MatchCIDR     MatchStrategy = "cidr"  // an address value inside a prefix (or equal to an address)
)

// ParamMatch is a param rule's match: only values that match Pattern by
// Strategy are limited by the rule. The zero ParamMatch matches every value.
type ParamMatch struct {
	Strategy MatchStrategy `yaml:"strategy" json:"strategy"`
	Pattern  string        `yaml:"pattern" json:"pattern"`
}

// IsZero reports whether m is unset (every value is limited).
func (m ParamMatch) IsZero() bool { return m == ParamMatch{} }

// DegradeStrategy is a circuit breaker's trip condition.
type DegradeStrategy string

const (
	DegradeSlowRatio  DegradeStrategy = "slowRatio"
	DegradeErrorRatio DegradeStrategy = "errorRatio"
	DegradeErrorCount DegradeStrategy = "errorCount"
)

// DegradeRule is Sentinel's circuit-breaking rule.
type DegradeRule struct {
	Resource         string          `yaml:"resource" json:"resource"`
	Strategy         DegradeStrategy `yaml:"strategy" json:"strategy"`
	MaxAllowedRtMs   int64           `yaml:"maxAllowedRtMs" json:"maxAllowedRtMs"`
	Threshold        float64         `yaml:"threshold" json:"threshold"`
	StatIntervalMs   int64           `yaml:"statIntervalMs" json:"statIntervalMs"`
	MinRequestAmount int64           `yaml:"minRequestAmount" json:"minRequestAmount"`
	RetryTimeoutMs   int64           `yaml:"retryTimeoutMs" json:"retryTimeoutMs"`
	ErrorStatuses    []string        `yaml:"errorStatuses" json:"errorStatuses"` // codes ("429") or classes ("5xx"), see ParseStatus
	ProbeNum         int64           `yaml:"probeNum" json:"probeNum"`           // half-open: probe calls, all must succeed to close

	Line int `yaml:"-" json:"line"`
}

// System is whole-gateway protection; a zero field is off.
type System struct {
	MaxQps         float64 `yaml:"maxQps" json:"maxQps"`
	MaxConcurrency int64   `yaml:"maxConcurrency" json:"maxConcurrency"`
	MaxAvgRtMs     int64   `yaml:"maxAvgRtMs" json:"maxAvgRtMs"`
	MaxCpuUsage    float64 `yaml:"maxCpuUsage" json:"maxCpuUsage"`
	Adaptive       bool    `yaml:"adaptive" json:"adaptive"`
}

// Cluster configures the Redis token service: which Redis (one of the
// RedisTarget forms, written at cluster's level) and the key namespace.
type Cluster struct {
	RedisTarget `yaml:",inline"`
	Namespace   string `yaml:"namespace" json:"namespace"`
	// Timeout bounds one decision of a cluster rule, the Redis round
	// trip included; past it the rule's fallback decides (Sentinel's
	// cluster client requestTimeout, Envoy ratelimit's timeout).
	Timeout Duration `yaml:"timeout" json:"timeout"`
}

// BlockResponse is what a blocked request gets: the top-level one, or a
// route's (Route.BlockResponse), which overrides the fields it sets.
type BlockResponse struct {
	Status      int    `yaml:"status" json:"status"`
	ContentType string `yaml:"contentType" json:"contentType"`
	Body        string `yaml:"body" json:"body"`
	// Redirect, when set, answers 302 with this Location instead of
	// status and body (Sentinel gateway's redirect): an absolute http(s)
	// URL or a path starting with "/".
	Redirect         string `yaml:"redirect" json:"redirect"`
	RateLimitHeaders *bool  `yaml:"rateLimitHeaders" json:"rateLimitHeaders"`
	// LegacyHeaders adds X-RateLimit-Limit, -Remaining and -Reset for the
	// policy RateLimit names.
	LegacyHeaders bool `yaml:"legacyHeaders" json:"legacyHeaders"`
}

// Headers reports whether RateLimit headers are sent (default true).
func (b BlockResponse) Headers() bool { return b.RateLimitHeaders == nil || *b.RateLimitHeaders }

// SourceKind is where a Source takes its value from.
type SourceKind string

const (
	SourceNone   SourceKind = ""
	SourceHeader SourceKind = "header"
	SourceQuery  SourceKind = "query"
	SourcePath   SourceKind = "path"
	SourceCookie SourceKind = "cookie"
	SourceHost   SourceKind = "host"
	SourceIP     SourceKind = "ip"
)

// Source names where a value comes from in a request, written "kind:NAME"
// (header:X-Origin, query:id, path:orderId, cookie:sid) or "host" / "ip".
type Source struct {
	Kind SourceKind
	Name string // canonical header name for header sources
}

// Duration is a time.Duration written as "30s", "500ms".
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
