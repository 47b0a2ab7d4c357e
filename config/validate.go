package config

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"sluice/internal/match"
)

// add records a validation problem at path, unless path (or a parent of it)
// already failed to decode: a value that could not be read would otherwise
// be reported twice.
func (c *checker) add(path, format string, args ...any) {
	for p := path; p != ""; p = parent(p) {
		if c.bad[p] {
			return
		}
	}
	c.push(c.overridden(Error{File: c.fileOf(path), Line: c.lineOf(path), Field: path, Msg: fmt.Sprintf(format, args...)}))
}

// lineOf is the line of path, or of its nearest ancestor the file mentions
// (a defaulted field is reported at its rule), or 1.
func (c *checker) lineOf(path string) int {
	for p := path; p != ""; p = parent(p) {
		if l, ok := c.lines[p]; ok {
			return l
		}
	}
	return 1
}

// parent strips the last ".key" or "[i]" of a path.
func parent(p string) string {
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

// oneOf checks an enum value, naming the allowed values in the message.
func (c *checker) oneOf(path, v string, allowed ...string) bool {
	if slices.Contains(allowed, v) {
		return true
	}
	c.add(path, "must be one of %s, got %s", strings.Join(allowed, ", "), quote(v))
	return false
}

func (c *checker) positive(path string, v float64) {
	if !c.has(path) {
		c.add(path, "is required (a number > 0)")
		return
	}
	if !(v > 0) || math.IsInf(v, 0) {
		c.add(path, "must be %s> 0, got %s", finite(v), num(v))
	}
}

// finite is "a finite number " for an infinite v (YAML's .inf), whose
// message "must be > 0, got +Inf" would read as if it were fine; else "".
func finite(v float64) string {
	if math.IsInf(v, 0) {
		return "a finite number "
	}
	return ""
}

func (c *checker) nonNegative(path string, v float64) {
	if !(v >= 0) || math.IsInf(v, 0) {
		c.add(path, "must be %s>= 0, got %s", finite(v), num(v))
	}
}

// count checks a rule's threshold: > 0 (>= 0 for an item, where 0 blocks
// the value) and at most MaxCount.
func (c *checker) count(path string, v float64, zeroOK bool) {
	if zeroOK {
		c.nonNegative(path, v)
	} else {
		c.positive(path, v)
	}
	c.atMost(path, v, MaxCount, "2^31")
}

// atMost refuses a value past one of the gateway's limits; a value the
// range check beside it refuses (NaN, infinite) is left to that check.
func (c *checker) atMost(path string, v, limit float64, why string) {
	if v > limit && !math.IsInf(v, 0) {
		c.add(path, "must be <= %s (%s), got %s", num(limit), why, num(v))
	}
}

// atMostInt is atMost for a whole-number setting.
func (c *checker) atMostInt(path string, v, limit int64, why string) {
	if v > limit {
		c.add(path, "must be <= %d (%s), got %d", limit, why, v)
	}
}

// duration refuses a time past MaxDurationMs (perSec: MaxDurationSec).
func (c *checker) duration(path string, v int64, perSec bool) {
	if perSec {
		c.atMostInt(path, v, MaxDurationSec, "one year")
	} else {
		c.atMostInt(path, v, MaxDurationMs, "one year")
	}
}

// wholeCount refuses a fractional concurrency threshold: calls in flight are
// counted in whole calls. A value <= 0, NaN or infinite is left to the range
// check beside it, so it is reported once.
func (c *checker) wholeCount(path string, v float64) {
	if v > 0 && !math.IsInf(v, 0) && v != math.Trunc(v) {
		c.add(path, "must be a whole number for grade concurrency, got %s", num(v))
	}
}

func (c *checker) interval(path string, ms int64) {
	if ms <= 0 || ms > maxStatIntervalMs {
		c.add(path, "must be > 0 and <= %d (one hour), got %d", maxStatIntervalMs, ms)
	}
}

// num formats a number as written: whole numbers without an exponent.
func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e21 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// routeIndex is what rules may refer to: resources, their entrances and path parameters.
type routeIndex struct {
	order     []string // resources in route order, each once
	resources map[string]bool
	entrances map[string]map[string]bool // resource -> entrances serving it
	params    map[string]map[string]bool // resource -> path parameter names
	groups    map[string]int             // API group name -> its index (nil: none)
}

// unknown describes what a rule's resource may be, for "unknown resource" messages.
func (ix routeIndex) unknown() string {
	if len(ix.groups) > 0 {
		return "no route or API group has it"
	}
	return "no route has it"
}

// maxClusterTimeout bounds cluster.timeout: every call of a cluster rule
// may wait that long for Redis.
const maxClusterTimeout = time.Second

func (c *checker) validate() {
	cfg := c.cfg
	c.listenAddr("listen", cfg.Listen, cfg.TLS.Listen != "")
	c.listenAddr("admin.listen", *cfg.Admin.Listen, true)
	c.oneOf("log.level", cfg.Log.Level, LogLevels()...)
	if c.has("log.format") { // unwritten: console on a terminal, else JSON
		c.oneOf("log.format", cfg.Log.Format, LogFormats()...)
	}
	for i, p := range cfg.TrustedProxies {
		c.prefix(idx("trustedProxies", i), p)
	}
	c.originStrip()
	c.upstreams()
	ix := c.routes()
	c.apiGroups(&ix)
	c.authorityRules(ix)
	c.flowRules(ix)
	c.paramRules(ix)
	c.sharedWindows()
	c.degradeRules(ix)
	s := cfg.System
	c.nonNegative("system.maxQps", s.MaxQps)
	c.nonNegative("system.maxConcurrency", float64(s.MaxConcurrency))
	c.nonNegative("system.maxAvgRtMs", float64(s.MaxAvgRtMs))
	c.duration("system.maxAvgRtMs", s.MaxAvgRtMs, false)
	if !(s.MaxCpuUsage >= 0 && s.MaxCpuUsage <= 1) {
		c.add("system.maxCpuUsage", "must be between 0 and 1 (a fraction of all CPUs), got %s", num(s.MaxCpuUsage))
	}
	if !c.redisTarget("cluster", cfg.Cluster.RedisTarget) && c.has("cluster") {
		c.add("cluster", "names no Redis: set one of cluster.redis (a redis:// URL), cluster.sentinel or cluster.clusterAddrs")
	}
	if d := cfg.Cluster.Timeout; d <= 0 || d.D() > maxClusterTimeout {
		c.add("cluster.timeout", "must be > 0 and <= 1s (each call of a cluster rule waits for it), got %s", d)
	}
	if ns := cfg.Cluster.Namespace; ns == "" {
		c.add("cluster.namespace", "must not be empty")
	} else if strings.ContainsAny(ns, "{}") {
		// Keys are "{namespace:...}": a brace in it would end or empty the
		// hash tag, and a Redis Cluster would put keys one script reads
		// together in different slots (CROSSSLOT: cluster limiting never on).
		c.add("cluster.namespace", "must not hold { or } (the namespace is inside the keys' Redis Cluster hash tag), got %s", quote(ns))
	}
	c.blockResponse(ix)
}

// originStrip: only a header can be removed before forwarding; strip with
// any other source would silently do nothing, so it is refused.
func (c *checker) originStrip() {
	o := c.cfg.Origin
	if !o.Strip || c.bad["origin.from"] {
		return
	}
	switch o.From.Kind {
	case SourceHeader:
	case SourceNone:
		c.add("origin.strip", "needs origin.from to be a header:NAME source, but origin.from is not set")
	default:
		c.add("origin.strip", "needs origin.from to be a header:NAME source (only a header can be removed before forwarding), got %s", quote(o.From.String()))
	}
}

func (c *checker) listenAddr(path, addr string, emptyOK bool) {
	if addr == "" {
		if !emptyOK {
			c.add(path, "must not be empty (an address like \":8080\")")
		}
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		c.add(path, "must be host:port or :port, got %s", quote(addr))
		return
	}
	// 256.1.1.1 or " 127.0.0.1" would stop the gateway at start, or at a
	// restart. A host name is not resolved here: validate may run where
	// the gateway's names are unknown (a CI job checking a compose file).
	if host != "" && !listenHost(host) {
		c.add(path, "the host must be an IP address or a host name, got %s", quote(addr))
		return
	}
	// net.Listen resolves the port the same way: 99999 or a name not in
	// /etc/services would stop the gateway at start, or at a restart.
	if _, err := net.LookupPort("tcp", port); err != nil {
		c.add(path, "the port must be a number in 0..65535 or a service name, got %s", quote(addr))
	}
}

// distinctListeners refuses two listeners on one port: the second bind
// would fail at start (":8080" and "127.0.0.1:8080" clash too).
func (c *checker) distinctListeners() {
	cfg := c.cfg
	ls := [...]struct{ path, addr string }{
		{"listen", cfg.Listen}, {"tls.listen", cfg.TLS.Listen}, {"admin.listen", *cfg.Admin.Listen},
	}
	for j := range ls {
		for i := range j {
			if !sharePort(ls[i].addr, ls[j].addr) {
				continue
			}
			if ls[i].addr == ls[j].addr {
				c.add(ls[j].path, "must differ from %s (both are %s)", ls[i].path, quote(ls[j].addr))
			} else {
				c.add(ls[j].path, "%s takes the port of %s (%s, %s): each listener needs its own port",
					quote(ls[j].addr), ls[i].path, quote(ls[i].addr), c.whereIs(ls[i].path))
			}
			break
		}
	}
}

// sharePort reports whether listeners on a and b would take one port: the
// same port (not 0, which picks a free one) on the same host, or on any
// host when either listens on every address ("", "0.0.0.0" and "::": Go
// listens on both IPv4 and IPv6 for each).
func sharePort(a, b string) bool {
	ha, pa, erra := net.SplitHostPort(a)
	hb, pb, errb := net.SplitHostPort(b)
	if erra != nil || errb != nil {
		return false
	}
	na, erra := net.LookupPort("tcp", pa)
	nb, errb := net.LookupPort("tcp", pb)
	if erra != nil || errb != nil || na != nb || na == 0 {
		return false
	}
	every := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	if ha == hb || every(ha) || every(hb) {
		return true
	}
	// localhost:8080 and 127.0.0.1:8080 clash too: compare what they bind.
	x, okx := boundAddr(ha)
	y, oky := boundAddr(hb)
	return okx && oky && x == y
}

// boundAddr is the address net.Listen binds for host h: the address it
// writes (an IPv4-mapped one as IPv4), or for a name the first IPv4
// address it resolves to, else its first (Listen binds one of a name's
// addresses, IPv4 first); ok false for a name that does not resolve
// within 2 s.
func boundAddr(h string) (a netip.Addr, ok bool) {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap(), true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h)
	if err != nil || len(ips) == 0 {
		return netip.Addr{}, false
	}
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			return ip.Unmap(), true
		}
	}
	return ips[0], true
}

// listenHost reports whether h can be a listener's host: an IP address,
// or a host name (letters, digits and '-' in dot-separated labels, the
// last not all digits, which an address like 256.1.1.1 is).
func listenHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	name := strings.TrimSuffix(h, ".")
	if dnsName(name, false) != nameOK {
		return false
	}
	// All digits in the last label: an IPv4 address gone wrong (256.1.1.1).
	return strings.Trim(name[strings.LastIndexByte(name, '.')+1:], "0123456789") != ""
}

func checkTarget(t string) string {
	u, err := url.Parse(t)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "must be an absolute http:// or https:// URL with a host, got " + quote(t)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "must not have a query or fragment, got " + quote(t)
	}
	if u.User != nil {
		// Not quoted: the message is logged and served too.
		return "must not hold a user or password: sluice does not send them, and target URLs show in metrics, logs and the admin API"
	}
	// url.Parse only checks that a port is digits; 0 or 99999 would parse
	// and then fail every request with 502.
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return "the port must be a number in 1..65535, got " + quote(t)
		}
	}
	return ""
}

// checkRedisURL accepts what the cluster client connects with; messages show
// the URL with its password masked, since they are logged and served on the
// admin API.
func checkRedisURL(s string) string {
	shown := quote(redactURL(s))
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return "must be a redis://host:port/db URL, got " + shown
	}
	// The cluster client sets its own timeouts and retries; options in the
	// query would be refused (unknown ones) or silently overridden.
	if u.RawQuery != "" || u.Fragment != "" {
		return "must not have a query or fragment (sluice sets the connection options itself), got " + shown
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return "the port must be a number in 1..65535, got " + shown
		}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		if _, err := strconv.ParseUint(db, 10, 16); err != nil {
			return "the database in " + shown + " must be a number"
		}
	}
	return ""
}

func (c *checker) routes() routeIndex {
	ix := routeIndex{resources: map[string]bool{}, entrances: map[string]map[string]bool{}, params: map[string]map[string]bool{}}
	routes := c.cfg.Routes
	if len(routes) == 0 && !c.bad["routes"] {
		c.add("routes", "at least one route is required")
	}
	served := map[string]int{} // normalised pattern + " " + method -> first route
	for i, r := range routes {
		p := idx("routes", i)
		params, norm, msg := checkPattern(r.Path)
		switch {
		case msg != "":
			c.add(p+".path", "%s", msg)
		case !c.cfg.Server.PathParametersKept() && HasPathParameter(patternText(r.Path)):
			c.add(p+".path", "holds a ';' (a path parameter), which a request's path may not hold while server.pathParameters is refuse: the route would match no request, got %s", quote(r.Path))
		case c.cfg.Server.EncodedSlashesRefused() && HasEncodedSlash(patternText(r.Path)):
			c.add(p+".path", "holds an escaped slash (%%2F or %%5C), which a request's path may not hold while server.encodedSlashes is refuse: the route would match no request, got %s", quote(r.Path))
		default:
			if why := unmatchable(literalText(r.Path, 0)); why != "" {
				c.add(p+".path", "%s: the route would match no request, got %s", why, quote(r.Path))
			}
		}
		seen := map[string]bool{}
		for j, m := range r.Methods {
			switch {
			case !slices.Contains(httpMethods, m):
				c.add(idx(p+".methods", j), "must be an HTTP method (%s), got %s", strings.Join(httpMethods, ", "), quote(m))
			case seen[m]:
				c.add(idx(p+".methods", j), "duplicate method %s", m)
			}
			seen[m] = true
		}
		if c.has(p+".methods") && len(r.Methods) == 0 {
			c.add(p+".methods", "must not be empty (leave it out to allow every method)")
		}
		if msg == "" {
			c.duplicateRoute(served, i, norm+hostsKey(r.Hosts))
		}
		if r.Upstream == "" {
			c.add(p+".upstream", "is required")
		} else if _, ok := c.cfg.Upstreams[r.Upstream]; !ok && !c.bad["upstreams"] {
			c.add(p+".upstream", "unknown upstream %s (defined: %s)", quote(r.Upstream), list(c.cfg.Upstreams))
		}
		if r.Resource == "" {
			c.add(p+".resource", "must not be empty (leave it out to use the path)")
		}
		if r.Entrance == "" {
			c.add(p+".entrance", "must not be empty (leave it out to use %q)", DefaultEntrance)
		}
		if r.StripPrefix != "" && r.StripPrefix[0] != '/' {
			c.add(p+".stripPrefix", "must start with \"/\", got %s", quote(r.StripPrefix))
		}
		if r.AcquireCount <= 0 {
			c.add(p+".acquireCount", "must be > 0, got %d", r.AcquireCount)
		}
		c.atMostInt(p+".acquireCount", r.AcquireCount, MaxCount, "2^31")
		c.oneOf(p+".forwarder", r.Forwarder, "auto", "standard", "fast")
		if r.OccupyTimeoutMs <= 0 || r.OccupyTimeoutMs > MaxOccupyTimeoutMs {
			c.add(p+".occupyTimeoutMs", "must be in 1..%d, got %d", MaxOccupyTimeoutMs, r.OccupyTimeoutMs)
		}
		if src := r.Prioritized.Source; src.Kind == SourcePath && msg == "" && !slices.Contains(params, src.Name) {
			c.add(p+".prioritized", "path parameter %s is not in the route's path %s", quote(src.Name), quote(r.Path))
		}

		if !ix.resources[r.Resource] {
			ix.order = append(ix.order, r.Resource)
		}
		ix.resources[r.Resource] = true
		if ix.entrances[r.Resource] == nil {
			ix.entrances[r.Resource] = map[string]bool{}
			ix.params[r.Resource] = map[string]bool{}
		}
		ix.entrances[r.Resource][r.Entrance] = true
		for _, name := range params {
			ix.params[r.Resource][name] = true
		}
	}
	return ix
}

// duplicateRoute reports route i if an earlier route serves one of its
// methods on a pattern chi cannot tell apart from its own.
func (c *checker) duplicateRoute(served map[string]int, i int, norm string) {
	r := c.cfg.Routes[i]
	first, both := -1, []string(nil)
	for _, m := range r.Methods {
		k := norm + " " + m
		// j == i: the route lists the method twice, reported as a duplicate method.
		if j, ok := served[k]; ok && j != i {
			if first < 0 {
				first = j
			}
			if j == first && !slices.Contains(both, m) {
				both = append(both, m)
			}
			continue
		}
		served[k] = i
	}
	if first < 0 {
		return
	}
	what := r.Path
	if len(both) < len(httpMethods) {
		what = strings.Join(both, ",") + " " + r.Path
	}
	c.add(idx("routes", i)+".path", "duplicate route: %s is already served by routes[%d] (line %d)", what, first, c.cfg.Routes[first].Line)
}

// list names a set's keys, sorted, for messages; at most ten.
func list[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > 10 {
		keys = append(keys[:10], "…")
	}
	return strings.Join(keys, ", ")
}

// resource checks that a rule's resource is served by some route.
func (c *checker) resource(path, res string, ix routeIndex) bool {
	if res == "" {
		c.add(path, "is required (the resource of a route)")
		return false
	}
	if !ix.resources[res] && !c.bad["routes"] {
		c.add(path, "unknown resource %s: %s (resources: %s)", quote(res), ix.unknown(), list(ix.resources))
		return false
	}
	return true
}

// prefix checks a CIDR or a single address (match.ParsePrefix, as the
// gateway reads it).
func (c *checker) prefix(path, s string) {
	if _, ok := match.ParsePrefix(s); !ok {
		c.add(path, "must be a CIDR (10.0.0.0/8) or an IP address, got %s", quote(s))
	}
}

func (c *checker) authorityRules(ix routeIndex) {
	for i, r := range c.cfg.AuthorityRules {
		p := idx("authorityRules", i)
		c.resource(p+".resource", r.Resource, ix)
		c.oneOf(p+".strategy", string(r.Strategy), string(AuthorityWhite), string(AuthorityBlack))
		apps := r.LimitApps()
		if len(apps) == 0 && len(r.IPs) == 0 {
			c.add(p, "names no caller: set limitApp (origins), ips (client addresses) or both")
		}
		for _, app := range apps {
			if app == LimitAppDefault || app == LimitAppOther {
				// A flow rule's keywords: here they would name an origin
				// called "default" or "other".
				c.add(p+".limitApp", "lists origins; %s is a flow rule's keyword, not an origin", quote(app))
				break
			}
		}
		c.originForms(p+".limitApp", apps)
		if len(apps) > 0 && c.cfg.Origin.From.IsZero() && !c.bad["origin.from"] {
			c.add(p+".limitApp", "needs origin.from (where a call's origin comes from): without it no call has an origin")
		}
		for j, s := range r.IPs {
			c.prefix(idx(p+".ips", j), s)
		}
	}
}

func (c *checker) flowRules(ix routeIndex) {
	for i, r := range c.cfg.FlowRules {
		p := idx("flowRules", i)
		knownRes := c.resource(p+".resource", r.Resource, ix)
		switch apps := r.LimitApps(); {
		case len(apps) == 0:
			c.add(p+".limitApp", "must not be empty (default, other, or a comma-separated list of origins)")
		case len(apps) > 1:
			for _, app := range apps {
				if app == LimitAppDefault || app == LimitAppOther {
					// In a list it would name an origin called "default"
					// or "other", not all callers or the unnamed ones.
					c.add(p+".limitApp", "%s stands alone; in a list of origins it would name an origin called %s (write a rule of its own)", quote(app), quote(app))
					break
				}
			}
			c.originForms(p+".limitApp", apps)
		case apps[0] != LimitAppDefault && apps[0] != LimitAppOther:
			c.originForms(p+".limitApp", apps)
		}
		gradeOK := c.oneOf(p+".grade", string(r.Grade), string(GradeQPS), string(GradeConcurrency))
		c.count(p+".count", r.Count, false)
		if r.Grade == GradeConcurrency {
			c.wholeCount(p+".count", r.Count)
		}
		c.oneOf(p+".strategy", string(r.Strategy), string(StrategyDirect), string(StrategyRelate), string(StrategyChain))
		switch r.Strategy {
		case StrategyDirect:
			if r.RefResource != "" {
				c.add(p+".refResource", "is only used with strategy relate or chain")
			}
		case StrategyRelate:
			switch {
			case r.RefResource == "":
				c.add(p+".refResource", "is required with strategy relate (the related resource)")
			case r.RefResource == r.Resource:
				c.add(p+".refResource", "must differ from resource with strategy relate")
			case !ix.resources[r.RefResource] && !c.bad["routes"]:
				c.add(p+".refResource", "unknown resource %s: %s (resources: %s)", quote(r.RefResource), ix.unknown(), list(ix.resources))
			}
		case StrategyChain:
			switch {
			case r.RefResource == "":
				c.add(p+".refResource", "is required with strategy chain (the entrance name)")
			case knownRes && !ix.entrances[r.Resource][r.RefResource]:
				c.add(p+".refResource", "no route of resource %s has entrance %s (entrances: %s)",
					quote(r.Resource), quote(r.RefResource), list(ix.entrances[r.Resource]))
			}
		}
		behaviorOK := c.oneOf(p+".controlBehavior", string(r.ControlBehavior),
			string(BehaviorReject), string(BehaviorWarmUp), string(BehaviorThrottle), string(BehaviorWarmUpThrottle))
		if gradeOK && behaviorOK && r.Grade == GradeConcurrency && r.ControlBehavior != BehaviorReject {
			c.add(p+".controlBehavior", "must be reject with grade concurrency, got %s", quote(string(r.ControlBehavior)))
		}
		if r.ControlBehavior == BehaviorWarmUp || r.ControlBehavior == BehaviorWarmUpThrottle {
			if r.WarmUpPeriodSec <= 0 {
				c.add(p+".warmUpPeriodSec", "must be > 0 with controlBehavior %s, got %d", r.ControlBehavior, r.WarmUpPeriodSec)
			}
			c.duration(p+".warmUpPeriodSec", r.WarmUpPeriodSec, true)
		}
		if r.ControlBehavior == BehaviorWarmUp && r.Grade != GradeConcurrency && r.Count > 0 && r.Count < 1 {
			// its window passes whole calls and its cold rate is under one:
			// it could pass nothing, ever
			c.add(p+".count", "must be >= 1 with controlBehavior warmUp, got %s (warmUpThrottle spaces calls at any rate)", num(r.Count))
		}
		if !(r.ColdFactor > 1) || math.IsInf(r.ColdFactor, 0) {
			c.add(p+".coldFactor", "must be %s> 1, got %s", finite(r.ColdFactor), num(r.ColdFactor))
		}
		c.nonNegative(p+".maxQueueingTimeMs", float64(r.MaxQueueingTimeMs))
		c.duration(p+".maxQueueingTimeMs", r.MaxQueueingTimeMs, false)
		if r.BurstCount != 0 && behaviorOK && r.ControlBehavior != BehaviorThrottle {
			c.add(p+".burstCount", "is only used with controlBehavior throttle, got controlBehavior %s", quote(string(r.ControlBehavior)))
		} else {
			c.nonNegative(p+".burstCount", float64(r.BurstCount))
			c.atMostInt(p+".burstCount", r.BurstCount, MaxCount, "2^31")
		}
		c.interval(p+".statIntervalMs", r.StatIntervalMs)
		c.oneOf(p+".clusterConfig.thresholdType", string(r.ClusterConfig.ThresholdType), string(ThresholdGlobal), string(ThresholdAvgLocal))
		if r.ClusterMode {
			c.clusterRate(p, r.Grade, gradeOK)
			if r.Strategy == StrategyRelate {
				// A relate rule is decided on the related resource's
				// statistics, which are this gateway's own: nothing of it
				// would be counted across the fleet.
				c.add(p+".clusterMode", "does not apply to strategy relate (it limits by this gateway's statistics of refResource); use a clusterMode rule on %s itself", quote(r.RefResource))
			}
		}
	}
}

// clusterRate checks what every clusterMode rule needs: a Redis to count
// in, and a rate (grade qps), the one thing the cluster's window counts.
func (c *checker) clusterRate(p string, grade Grade, gradeOK bool) {
	if !c.has("cluster") {
		c.add(p+".clusterMode", "needs a Redis: set cluster.redis (a redis:// URL), cluster.sentinel or cluster.clusterAddrs")
	}
	if gradeOK && grade != GradeQPS {
		c.add(p+".clusterMode", "needs grade qps, got %s", quote(string(grade)))
	}
}

func (c *checker) paramRules(ix routeIndex) {
	for i, r := range c.cfg.ParamRules {
		p := idx("paramRules", i)
		knownRes := c.resource(p+".resource", r.Resource, ix)
		if r.Param.IsZero() {
			c.add(p+".param", "is required (%s, or several joined by \"+\")", sourceForms)
		}
		for _, src := range r.Param {
			if src.Kind == SourcePath && knownRes && !ix.params[r.Resource][src.Name] {
				c.add(p+".param", "no route of resource %s has a path parameter {%s}", quote(r.Resource), src.Name)
			}
		}
		matchErrs := len(c.errs)
		c.paramMatch(p, r)
		matchOK := len(c.errs) == matchErrs
		gradeOK := c.oneOf(p+".grade", string(r.Grade), string(GradeQPS), string(GradeConcurrency))
		c.count(p+".count", r.Count, false)
		if r.Grade == GradeConcurrency {
			c.wholeCount(p+".count", r.Count)
		}
		if r.DurationSec <= 0 {
			c.add(p+".durationSec", "must be > 0, got %d", r.DurationSec)
		}
		c.duration(p+".durationSec", r.DurationSec, true)
		behaviorOK := c.oneOf(p+".controlBehavior", string(r.ControlBehavior), string(BehaviorReject), string(BehaviorThrottle))
		if _, quota := r.Window.Calendar(); r.BurstCount != 0 && !quota && !r.ClusterMode && gradeOK && behaviorOK &&
			(r.Grade != GradeQPS || r.ControlBehavior != BehaviorReject) {
			// Only the qps reject bucket holds extra tokens: a throttle
			// queue and an in-flight count would silently ignore it. (A
			// quota and clusterMode refuse any burstCount, below.)
			c.add(p+".burstCount", "is only used with grade qps and controlBehavior reject, got grade %s, controlBehavior %s",
				quote(string(r.Grade)), quote(string(r.ControlBehavior)))
		} else {
			c.nonNegative(p+".burstCount", float64(r.BurstCount))
			c.atMostInt(p+".burstCount", r.BurstCount, MaxCount, "2^31")
		}
		if gradeOK && behaviorOK && r.Grade == GradeConcurrency && r.ControlBehavior != BehaviorReject {
			c.add(p+".controlBehavior", "must be reject with grade concurrency, got %s", quote(string(r.ControlBehavior)))
		}
		c.nonNegative(p+".maxQueueingTimeMs", float64(r.MaxQueueingTimeMs))
		c.duration(p+".maxQueueingTimeMs", r.MaxQueueingTimeMs, false)
		if r.MaxTrackedValues <= 0 {
			c.add(p+".maxTrackedValues", "must be > 0, got %d", r.MaxTrackedValues)
		}
		c.oneOf(p+".clusterConfig.thresholdType", string(r.ClusterConfig.ThresholdType), string(ThresholdGlobal), string(ThresholdAvgLocal))
		c.oneOf(p+".window", string(r.Window), string(WindowRolling), string(WindowDay), string(WindowMonth))
		c.zone(p, r)
		if _, quota := r.Window.Calendar(); quota {
			c.calendarQuota(p, r, gradeOK, behaviorOK)
		} else if r.ClusterMode {
			// The cluster counts each value in an exact sliding window of
			// count per durationSec (docs/cluster.md): a rate, decided per
			// call. In-flight counts, a queue's spacing and a bucket's extra
			// burst have no such window.
			c.clusterRate(p, r.Grade, gradeOK)
			if behaviorOK && r.ControlBehavior != BehaviorReject {
				c.add(p+".clusterMode", "needs controlBehavior reject, got %s", quote(string(r.ControlBehavior)))
			}
			if r.BurstCount != 0 {
				c.add(p+".burstCount", "must be 0 with clusterMode (the cluster window passes at most count per durationSec), got %d", r.BurstCount)
			}
		}
		c.countOn(p, r, gradeOK, behaviorOK)
		_, quota := r.Window.Calendar()
		seen := map[string]int{}
		reach := itemReach{r: &r}
		if m, err := r.Match.Matcher(); err == nil && !r.Match.IsZero() && matchOK {
			reach.match = &m
		}
		for j, it := range r.Items {
			ip := idx(p+".items", j)
			// An exact item and a class with the same pattern are two items.
			k := string(it.Match) + "\x00" + it.Value
			if !it.Class() {
				k = string(MatchExact) + "\x00" + it.Value
			}
			first, dup := seen[k]
			if dup {
				c.add(ip+".value", "duplicate value %s (also items[%d])", quote(it.Value), first)
			}
			seen[k] = j
			itemErrs := len(c.errs)
			c.paramItem(ip, r.Param, it)
			if len(c.errs) == itemErrs && !dup { // an item already refused is written wrong
				reach.check(c, ip, j)
			}
			if !c.has(ip + ".count") {
				// Left out, it was 0: the value refused for good, with no
				// Retry-After, where the writer meant the rule's count or
				// forgot the field.
				c.add(ip+".count", "is required (the value's own count, a number >= 0; 0 refuses every call with the value)")
			} else {
				c.count(ip+".count", it.Count, true)
			}
			if r.Grade == GradeConcurrency {
				c.wholeCount(ip+".count", it.Count)
			}
			if quota && r.Grade != GradeConcurrency {
				c.quotaCount(ip+".count", r.Window, it.Count)
			}
		}
	}
}

// itemReach finds the items of one param rule that no value reaches: the
// first item that matches a value wins (hotparam's paramOf: an exact item
// only if no class listed before it takes the value), and the rule takes
// only the values its own match does.
type itemReach struct {
	r       *ParamRule
	match   *match.Matcher // the rule's match; nil: none, or one refused
	classes []int          // the class items so far that compile
	ms      []match.Matcher
}

// check looks at item j (path ip), in file order.
func (x *itemReach) check(c *checker, ip string, j int) {
	it := x.r.Items[j]
	if it.Class() {
		m, err := it.Matcher()
		if err != nil {
			return
		}
		x.classes, x.ms = append(x.classes, j), append(x.ms, m)
		if x.match != nil && x.match.Disjoint(&m) {
			c.add(ip+".value", "the rule's match (%s %s) takes no value %s %s takes, so the item would never apply", x.r.Match.Strategy, quote(x.r.Match.Pattern), it.Match, quote(it.Value))
			return
		}
		for i := range len(x.ms) - 1 {
			if x.ms[i].Includes(&m) {
				k := x.classes[i]
				prev := x.r.Items[k]
				c.add(ip+".value", "items[%d] (%s %s) takes every value %s %s takes first, so the item would never apply: list it before items[%d]", k, prev.Match, quote(prev.Value), it.Match, quote(it.Value), k)
				return
			}
		}
		return
	}
	if it.Value == "" {
		return
	}
	if x.match != nil && !x.match.Match(it.Value) {
		c.add(ip+".value", "the rule's match (%s %s) does not take %s, so the item would never apply", x.r.Match.Strategy, quote(x.r.Match.Pattern), quote(it.Value))
	}
	for i, m := range x.ms {
		if m.Match(it.Value) {
			k := x.classes[i]
			prev := x.r.Items[k]
			c.add(ip+".value", "items[%d] (%s %s) takes %s first, so the item would never apply: list it before items[%d]", k, prev.Match, quote(prev.Value), quote(it.Value), k)
			return
		}
	}
}

// gatewayField reports a response field the gateway writes itself (the
// RateLimit fields, Retry-After, X-Sluice-Blocked). Field names compare
// without case.
func gatewayField(name string) bool {
	for _, f := range [...]string{"RateLimit", "RateLimit-Policy", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-Sluice-Blocked"} {
		if strings.EqualFold(name, f) {
			return true
		}
	}
	return false
}

// HopByHop reports a field no proxy passes on as received (RFC 9110 7.6.1),
// given in canonical form (textproto's: "Te", not "TE"). It is the one list
// of them: the proxy drops these from requests and answers (an answer's
// Trailer excepted, which Go re-announces), and validate refuses them where
// a rule would read a field the proxy has already removed.
func HopByHop(canon string) bool {
	switch canon {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// countOn checks when a param rule's calls take their tokens: request, or
// after the answer (failure with its failureStatuses, responseHeader:NAME),
// which needs a bucket that rejects (grade qps, controlBehavior reject): a
// call in flight or a queue's place is taken as the call enters. A calendar
// quota may count after the answer too (a month's tokens used).
func (c *checker) countOn(p string, r ParamRule, gradeOK, behaviorOK bool) {
	cp := p + ".countOn"
	switch name, isHeader := strings.CutPrefix(string(r.CountOn), CountOnHeaderPrefix); {
	case r.CountOn == CountOnRequest, r.CountOn == CountOnFailure:
	case isHeader && !IsToken(name):
		c.add(cp, "responseHeader needs a header name (an HTTP token), as in \"responseHeader:X-Tokens-Used\", got %s", quote(string(r.CountOn)))
		return
	case !isHeader:
		c.add(cp, "must be one of request, failure, responseHeader:NAME, got %s", quote(string(r.CountOn)))
		return
	case HopByHop(textproto.CanonicalMIMEHeaderKey(name)):
		// Removed from the answer before the rule reads it: every call
		// would cost acquireCount, the figure never seen.
		c.add(cp, "%s is a hop-by-hop field, which the gateway removes from the answer before reading it; the upstream's figure needs an end-to-end field, as in \"responseHeader:X-Tokens-Used\"", quote(name))
		return
	case gatewayField(name):
		// The figure's field is removed from the answer: the gateway's
		// own would go with it.
		c.add(cp, "%s is a field the gateway writes on its answers; the upstream's figure needs a field of its own, as in \"responseHeader:X-Tokens-Used\"", quote(name))
		return
	}
	if r.CountOn == CountOnFailure && len(r.FailureStatuses) == 0 {
		c.add(p+".failureStatuses", "is required with countOn failure (the answers that take tokens, e.g. [401])")
	}
	if r.CountOn != CountOnFailure && c.has(p+".failureStatuses") {
		c.add(p+".failureStatuses", "is read only with countOn failure, got countOn %s", quote(string(r.CountOn)))
	}
	c.statuses(p+".failureStatuses", "failureStatuses", r.FailureStatuses)
	if !r.CountOn.AfterAnswer() {
		return
	}
	if gradeOK && r.Grade != GradeQPS {
		c.add(cp, "%s needs grade qps (a call in flight is counted as it enters), got %s", quote(string(r.CountOn)), quote(string(r.Grade)))
	}
	if behaviorOK && r.ControlBehavior != BehaviorReject {
		c.add(cp, "%s needs controlBehavior reject (a queue spaces calls before any answer), got %s", quote(string(r.CountOn)), quote(string(r.ControlBehavior)))
	}
}

// statuses checks a list of statuses (errorStatuses, failureStatuses):
// each a code or a class that ParseStatus reads, none twice.
func (c *checker) statuses(path, name string, list []string) {
	seen := map[string]int{}
	for j, st := range list {
		sp := idx(path, j)
		if _, _, ok := ParseStatus(st); !ok {
			c.add(sp, "must be a status code in 100..599 (429) or a class (\"5xx\"), got %s", quote(st))
			continue
		}
		key := strings.ToLower(st)
		if first, dup := seen[key]; dup {
			c.add(sp, "duplicate status %s (also %s[%d])", quote(st), name, first)
			continue
		}
		seen[key] = j
	}
}

// zone checks a param rule's timezone: an IANA name the gateway can load
// (the binary carries the zone database), and set only where it counts.
func (c *checker) zone(p string, r ParamRule) {
	tp := p + ".timezone"
	if !c.has(tp) {
		return
	}
	if _, quota := r.Window.Calendar(); !quota && r.Window == WindowRolling {
		// The default written out (SPEC §3's example does) says nothing
		// the rule does not do; another zone would be silently ignored.
		if r.Timezone != DefaultTimezone {
			c.add(tp, "applies only to window day or month (a calendar quota), and this rule's window is rolling")
		}
		return
	}
	// "" and "Local" load, as UTC and as the machine's own zone: a rule
	// must mean the same day on every gateway of a fleet.
	if _, err := r.Zone(); err != nil || r.Timezone == "" || r.Timezone == "Local" {
		c.add(tp, "must be an IANA time zone name such as UTC, Europe/Berlin or America/New_York, got %s", quote(r.Timezone))
	}
}

// calendarQuota checks a param rule with window day or month: a quota of
// count calls per calendar day or month for each value, kept in Redis so
// that it survives a restart and is shared by the fleet (docs/rules.md).
// Whatever has no meaning for a quota is refused where it is written, so
// that a rule never silently does less than it says.
func (c *checker) calendarQuota(p string, r ParamRule, gradeOK, behaviorOK bool) {
	w := quote(string(r.Window))
	if !r.ClusterMode {
		c.add(p+".window", "%s needs clusterMode: true (a calendar quota is kept in Redis, so that it outlives a restart and is shared by every gateway)", w)
	} else if !c.has("cluster") {
		c.add(p+".clusterMode", "needs a Redis: set cluster.redis (a redis:// URL), cluster.sentinel or cluster.clusterAddrs")
	}
	if gradeOK && r.Grade != GradeQPS {
		c.add(p+".grade", "must be qps with window %s (a quota counts calls, not calls in flight), got %s", w, quote(string(r.Grade)))
	}
	if behaviorOK && r.ControlBehavior != BehaviorReject {
		c.add(p+".controlBehavior", "must be reject with window %s (a call over the quota would queue until the reset), got %s", w, quote(string(r.ControlBehavior)))
	}
	if c.has(p + ".durationSec") {
		c.add(p+".durationSec", "has no meaning with window %s: the period is the calendar %s in timezone", w, r.Window)
	}
	if r.BurstCount != 0 {
		c.add(p+".burstCount", "must be 0 with window %s (a quota passes count per period, no more), got %d", w, r.BurstCount)
	}
	if r.MaxQueueingTimeMs != 0 {
		c.add(p+".maxQueueingTimeMs", "must be 0 with window %s (nothing queues for a quota), got %d", w, r.MaxQueueingTimeMs)
	}
	if r.ClusterConfig.ThresholdType == ThresholdAvgLocal {
		c.add(p+".clusterConfig.thresholdType", "must be global with window %s (a quota is the fleet's total; avgLocal would change it with every gateway that comes or goes during the period)", w)
	}
	if r.Grade != GradeConcurrency { // its own whole-number check says so
		c.quotaCount(p+".count", r.Window, r.Count)
	}
}

// quotaCount refuses a fractional quota: a calendar quota passes whole
// calls. A value the range check refuses is left to it.
func (c *checker) quotaCount(path string, w Window, v float64) {
	if v > 0 && !math.IsInf(v, 0) && v != math.Trunc(v) {
		c.add(path, "must be a whole number with window %s, got %s", quote(string(w)), num(v))
	}
}

// matchStrategies are the strategies a match may name, for messages.
var matchStrategies = []string{string(MatchExact), string(MatchPrefix), string(MatchContains), string(MatchRegex), string(MatchCIDR)}

// paramMatch checks a param rule's match: a known strategy, a pattern it
// compiles, and cidr only on a key whose values may be addresses.
func (c *checker) paramMatch(p string, r ParamRule) {
	m, mp := r.Match, p+".match"
	switch {
	case m.IsZero():
		return
	case m.Strategy == "":
		c.add(mp+".strategy", "is required with a pattern (one of %s)", strings.Join(matchStrategies, ", "))
		return
	case !c.oneOf(mp+".strategy", string(m.Strategy), matchStrategies...):
		return
	}
	if m.Strategy == MatchCIDR && !c.cidrKey(mp+".strategy", r.Param) {
		return
	}
	if _, err := m.Matcher(); err != nil {
		c.add(mp+".pattern", "%s", err.Error())
		return
	}
	c.hostPattern(mp+".pattern", r.Param, m.Strategy, m.Pattern)
}

// hostPattern refuses a pattern on a host key that no host value can
// match: the host source's values are lower-case, without port or trailing
// dot (match.Host), so an exact pattern must be so written and a prefix or
// contains pattern must hold no upper-case letter. (A regex may say (?i).)
func (c *checker) hostPattern(path string, key Key, s MatchStrategy, pattern string) {
	if len(key) != 1 || key[0].Kind != SourceHost {
		return
	}
	switch s {
	case MatchExact:
		c.sourceForm(path, key[0], pattern)
	case MatchPrefix, MatchContains:
		if lower := strings.ToLower(pattern); lower != pattern {
			c.add(path, "write the pattern in lower case, %s: the host source gives lower-case hosts, got %s", quote(lower), quote(pattern))
		}
	}
}

// paramItem checks an item's match, and that an exact item is a value some
// request can give: not empty, and for a composite key as many non-empty
// parts as the key has sources, escaped as AppendJoined escapes them, an
// ip or host value (or part) written as that source writes it.
func (c *checker) paramItem(ip string, key Key, it ParamItem) {
	if it.Match != "" && !c.oneOf(ip+".match", string(it.Match), matchStrategies...) {
		return
	}
	if it.Match == MatchCIDR && !c.cidrKey(ip+".match", key) {
		return
	}
	if it.Class() {
		if _, err := it.Matcher(); err != nil {
			c.add(ip+".value", "%s", err.Error())
			return
		}
		c.hostPattern(ip+".value", key, it.Match, it.Value)
		return
	}
	if it.Value == "" {
		// No source gives an empty value (a request without the parameter,
		// or with it empty, has none), so the item would never apply.
		c.add(ip+".value", "must not be empty: no source gives an empty value (a request without the parameter is not limited by the rule; limit it with a flow rule)")
		return
	}
	if !key.Composite() {
		if len(key) == 1 {
			c.sourceForm(ip+".value", key[0], it.Value)
		}
		return
	}
	parts, ok := SplitJoined(it.Value)
	if len(parts) != len(key) {
		c.add(ip+".value", "must be %d values joined by \"+\", one for each source of %s (\\+ and \\\\ stand for a \"+\" and a \"\\\" inside a value), got %s",
			len(key), key.String(), quote(it.Value))
		return
	}
	// The item is compared byte for byte with the joined value, which
	// AppendJoined writes from each source's own form: name the value to
	// write whenever a part is spelled otherwise.
	var want []byte
	var why []string
	if !ok {
		why = append(why, `a "\" inside a value is written "\\", a "+" "\+"`)
	}
	for i, part := range parts {
		if part == "" {
			c.add(ip+".value", "part %d (%s) is empty: a request giving an empty value has no value for the key, so the item would never apply, got %s",
				i+1, key[i].String(), quote(it.Value))
			return
		}
		if form := sourceValue(key[i], part); form != "" && form != part {
			why = append(why, sourceFormWhy(key[i]))
			part = form
		}
		want = AppendJoined(want, part, i == 0)
	}
	if len(why) > 0 {
		c.add(ip+".value", "write the value as the sources of %s give it, %s (%s), got %s",
			key.String(), quote(string(want)), strings.Join(why, "; "), quote(it.Value))
	}
}

// sourceFormWhy says how a source with one canonical form writes values.
func sourceFormWhy(src Source) string {
	switch src.Kind {
	case SourceIP:
		return "the ip source gives addresses as RFC 5952 writes them, an IPv4-mapped one as IPv4"
	case SourceHost:
		return "the host source gives hosts lower-case, without port or trailing dot"
	}
	return credentialsWhy
}

// credentialsWhy is how header:Authorization gives credentials.
const credentialsWhy = "the header source gives credentials with the scheme spelt one way (Basic, Bearer, other schemes in lower case), one space after it, and Basic's base64 in its standard form"

// sourceForm refuses an exact item value of one source that the source
// never gives in that spelling (compared byte for byte, it would load and
// never apply), naming the spelling to write.
func (c *checker) sourceForm(path string, src Source, v string) {
	form := sourceValue(src, v)
	if form == "" || form == v {
		return
	}
	switch src.Kind {
	case SourceIP:
		c.add(path, "write the address as the ip source gives it, %s, got %s", quote(form), quote(v))
	case SourceHost:
		c.add(path, "write the host as the host source gives it (lower-case, without port or trailing dot), %s, got %s", quote(form), quote(v))
	case SourceHeader:
		c.add(path, "write the credentials as %s gives them, %s (%s), got %s", src.String(), quote(form), credentialsWhy, quote(v))
	}
}

// sourceValue is v as src gives it, for the sources that write their values
// in one canonical form: ip (RFC 5952, IPv4-mapped as IPv4), host
// (match.Host) and the credentials headers (match.Credentials). "" when
// src has no such form or v is not an address.
func sourceValue(src Source, v string) string {
	switch src.Kind {
	case SourceIP:
		if a, ok := match.Addr(v); ok {
			return match.AddrString(a, v)
		}
	case SourceHost:
		return match.Host(v)
	case SourceHeader:
		if src.Name == "Authorization" || src.Name == "Proxy-Authorization" {
			return match.CredentialsForm(v)
		}
	}
	return ""
}

// originForms refuses an origin name that origin.from never gives: with
// origin.from ip or host, a call's origin is one canonical address, or a
// lower-case host without a port, so any other spelling names no caller.
func (c *checker) originForms(path string, apps []string) {
	for _, app := range apps {
		if form := sourceValue(c.cfg.Origin.From, app); form != "" && form != app {
			c.add(path, "origin.from %s gives %s, never %s: the rule would name no caller", c.cfg.Origin.From.String(), quote(form), quote(app))
		}
	}
}

// cidrKey refuses a cidr match on a key whose values are never addresses.
func (c *checker) cidrKey(path string, key Key) bool {
	if key.IsZero() || key.AddressValued() {
		return true
	}
	c.add(path, "cidr needs address values: param must be ip or a header holding an address, got %s", quote(key.String()))
	return false
}

func (c *checker) degradeRules(ix routeIndex) {
	perResource := map[string]int{}
	for i, r := range c.cfg.DegradeRules {
		p := idx("degradeRules", i)
		if c.resource(p+".resource", r.Resource, ix) {
			if perResource[r.Resource]++; perResource[r.Resource] == MaxDegradeRulesPerResource+1 {
				c.add(p+".resource", "resource %s has more than %d degrade rules (the most one resource may have)",
					quote(r.Resource), MaxDegradeRulesPerResource)
			}
		}
		c.oneOf(p+".strategy", string(r.Strategy), string(DegradeSlowRatio), string(DegradeErrorRatio), string(DegradeErrorCount))
		switch r.Strategy {
		case DegradeSlowRatio, DegradeErrorRatio:
			if !(r.Threshold > 0 && r.Threshold <= 1) {
				c.add(p+".threshold", "must be a ratio in (0, 1] with strategy %s, got %s", r.Strategy, num(r.Threshold))
			}
		case DegradeErrorCount:
			if !(r.Threshold >= 1) || math.IsInf(r.Threshold, 0) {
				c.add(p+".threshold", "must be an error count >= 1 with strategy errorCount, got %s", num(r.Threshold))
			}
		}
		if r.Strategy == DegradeSlowRatio && r.MaxAllowedRtMs <= 0 {
			c.add(p+".maxAllowedRtMs", "must be > 0 with strategy slowRatio, got %d", r.MaxAllowedRtMs)
		} else {
			c.nonNegative(p+".maxAllowedRtMs", float64(r.MaxAllowedRtMs))
		}
		c.duration(p+".maxAllowedRtMs", r.MaxAllowedRtMs, false)
		c.interval(p+".statIntervalMs", r.StatIntervalMs)
		if r.MinRequestAmount <= 0 {
			c.add(p+".minRequestAmount", "must be > 0, got %d", r.MinRequestAmount)
		}
		if r.RetryTimeoutMs <= 0 {
			c.add(p+".retryTimeoutMs", "must be > 0, got %d", r.RetryTimeoutMs)
		}
		c.duration(p+".retryTimeoutMs", r.RetryTimeoutMs, false)
		c.statuses(p+".errorStatuses", "errorStatuses", r.ErrorStatuses)
		if r.ProbeNum < 1 {
			c.add(p+".probeNum", "must be >= 1 (probe calls in half-open), got %d", r.ProbeNum)
		}
		c.atMostInt(p+".probeNum", r.ProbeNum, MaxCount, "2^31")
	}
}
