package cluster

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"sluice/config"
	"sluice/internal/calendar"
	"sluice/internal/redisconn"
)

// ruleIdent is the part of a FlowRule that defines what is counted and how
// much: the fields config.RuleIdentity marks Cluster (TestRedisWindowFollowsRuleIdentity
// checks that it reads exactly those). Two rules with equal idents share a
// Redis window, in this gateway and in every other one; Line and local-only
// behaviour fields are not part of it, so moving a rule in the file or
// editing dryRun keeps its window. The fields are written out here, in a
// fixed order, so that the hash (the Redis keys) stays what every gateway
// of the fleet computes, whatever version it runs.
type ruleIdent struct {
	resource, limitApp, refResource string
	grade                           config.Grade
	strategy                        config.Strategy
	threshold                       config.ThresholdType
	count                           float64
	statIntervalMs                  int64
}

func identOf(r *config.FlowRule) ruleIdent {
	return ruleIdent{
		resource: r.Resource, limitApp: r.LimitApp, refResource: r.RefResource,
		grade: r.Grade, strategy: r.Strategy, threshold: r.ClusterConfig.ThresholdType,
		count: r.Count, statIntervalMs: r.StatIntervalMs,
	}
}

// paramIdent is the part of a clusterMode ParamRule that defines what is
// counted and how much (the fields config.RuleIdentity marks Cluster), with
// the count that applies: the rule's, or an item's for the item's values.
// Values of one rule with equal counts share an ident; each value has its
// own window under it.
type paramIdent struct {
	resource  string
	param     string // the key's sources as written: "ip+header:X-Tenant"
	match     config.ParamMatch
	grade     config.Grade
	threshold config.ThresholdType
	count     float64
	duration  int64
	window    config.Window // rolling, or a calendar quota's day or month
	timezone  string        // a calendar quota's zone
	// countOn: "" for calls counted as they enter (countOn request, whose
	// windows keep the keys they had before countOn existed), else what
	// is counted after the answer.
	countOn string
}

func paramIdentOf(r *config.ParamRule, count float64) paramIdent {
	id := paramIdent{
		resource: r.Resource, param: r.Param.String(), match: r.Match, grade: r.Grade,
		threshold: r.ClusterConfig.ThresholdType, count: count, duration: r.DurationSec,
		window: r.Window, timezone: r.Timezone,
	}
	if r.CountOn.AfterAnswer() {
		id.countOn = string(r.CountOn)
	}
	return id
}

// hash is paramIdent's stable FNV-1a, as ruleIdent.hash. The window and
// the zone are hashed only when they differ from what every rule had
// before calendar quotas (rolling, UTC), so that those rules keep their
// keys across the upgrade.
func (id paramIdent) hash() uint64 {
	h := fnv.New64a()
	var num [8]byte
	str := func(s string) {
		binary.LittleEndian.PutUint64(num[:], uint64(len(s)))
		h.Write(num[:])
		h.Write([]byte(s))
	}
	for _, s := range []string{id.resource, id.param, string(id.match.Strategy), id.match.Pattern, string(id.grade), string(id.threshold)} {
		str(s)
	}
	binary.LittleEndian.PutUint64(num[:], math.Float64bits(id.count))
	h.Write(num[:])
	binary.LittleEndian.PutUint64(num[:], uint64(id.duration))
	h.Write(num[:])
	if id.window != "" && id.window != config.WindowRolling {
		str("window:" + string(id.window))
	}
	// UTC: the zone of every rule's count before rules had one.
	if id.timezone != "" && id.timezone != "UTC" {
		str("timezone:" + id.timezone)
	}
	if id.countOn != "" {
		str("countOn:" + id.countOn)
	}
	return h.Sum64()
}

// ruleSpec is what the acquire script needs about a rule, prepared once.
type ruleSpec struct {
	// prefix is "{namespace:w:<rule hash>}:", the origin follows: the hash
	// tag is the rule's, so all of a rule's windows share one Redis Cluster
	// slot and different rules spread over the shards.
	prefix string
	slot   int  // the prefix's hash slot: calls of one slot share a script run
	avg    bool // thresholdType avgLocal
	// perValue (param rules): each value's window is a hash tag of its own,
	// "{namespace:p:<rule hash>:<value>}", so that on a Redis Cluster a
	// rule's values spread over the shards like rules do; the call's slot
	// is its key's, not prefix's.
	perValue bool
	// lease: the window can be big enough to lease tokens (K >= 2048, or
	// avgLocal). Others never get a lease, so their calls skip the lease
	// cache: a flood of distinct values adds no entry there.
	lease bool
	// argv is the rule's script arguments besides n and demand, boxed once so
	// that a call does not box them again: count, statIntervalMs, avgLocal flag.
	argv [3]any
	// A calendar quota (param rule with window day or month): the value's
	// key is "{namespace:q:<rule hash>:<value>}<period>", a counter of the
	// period's calls; unit and loc say which period, and now's is cached.
	quota  bool
	unit   calendar.Unit
	loc    *time.Location
	period atomic.Pointer[period]
}

// period is a calendar quota's current period, as the keys and the script
// need it: computed once when a call first falls in it.
type period struct {
	start, reset time.Time
	label        string // the key's suffix: "2026-12-02", "2026-12"
	expiry       atomic.Pointer[expiry]
}

// expiry is when a period's keys expire on Redis's clock (Unix ms, boxed
// once per skew): quotaGrace after the reset, so that a gateway whose
// clock is a little behind still finds the count.
type expiry struct {
	skew int64 // ms, Redis's clock minus the gateway's, it was made for
	at   any
}

// quotaGrace is how long a period's count outlives its reset.
const quotaGrace = 10 * time.Minute

// expireAt returns the Unix ms on Redis's clock at which the period's keys
// expire, given skew, Redis's clock minus this gateway's in ms. The reset
// is this gateway's: read on Redis's clock it is skew later, and an
// expiry computed on the gateway's clock alone was already past on
// Redis's for a gateway more than quotaGrace behind, which deleted the
// count at every pass (a day behind: 20 of 20 calls passed a quota of 3).
// The skew a heartbeat measures moves by a few ms each time: within a
// second, the boxed value is kept.
func (p *period) expireAt(skew int64) any {
	if e := p.expiry.Load(); e != nil && e.skew-skew < 1000 && skew-e.skew < 1000 {
		return e.at
	}
	e := &expiry{skew: skew, at: strconv.FormatInt(p.reset.Add(quotaGrace).UnixMilli()+skew, 10)}
	p.expiry.Store(e)
	return e.at
}

// periodAt returns the period of a quota spec that holds now.
func (s *ruleSpec) periodAt(now time.Time) *period {
	if p := s.period.Load(); p != nil && !now.Before(p.start) && now.Before(p.reset) {
		return p
	}
	start, reset := calendar.Bounds(now, s.loc, s.unit)
	p := &period{start: start, reset: reset, label: calendar.Label(start, s.loc, s.unit)}
	s.period.Store(p) // calls racing at a boundary may store either: both are right for their instant
	return p
}

// hash is a stable 64-bit FNV-1a of the identity: equal on every gateway and
// across restarts (unlike maphash), so all gateways meet on the same key.
func (id ruleIdent) hash() uint64 {
	h := fnv.New64a()
	var num [8]byte
	for _, s := range []string{id.resource, id.limitApp, string(id.grade), string(id.strategy), id.refResource, string(id.threshold)} {
		binary.LittleEndian.PutUint64(num[:], uint64(len(s)))
		h.Write(num[:]) // length prefixes keep ("ab","c") apart from ("a","bc")
		h.Write([]byte(s))
	}
	binary.LittleEndian.PutUint64(num[:], math.Float64bits(id.count))
	h.Write(num[:])
	binary.LittleEndian.PutUint64(num[:], uint64(id.statIntervalMs))
	h.Write(num[:])
	return h.Sum64()
}

func newSpec(ns string, id ruleIdent) *ruleSpec {
	avg := "0"
	if id.threshold == config.ThresholdAvgLocal {
		avg = "1"
	}
	// "w:" rather than the bucketed window's "f:", and the rule's own hash
	// tag rather than the namespace's: a gateway of an old layout meeting
	// a new one counts apart instead of failing on a key of another type.
	prefix := "{" + ns + ":w:" + strconv.FormatUint(id.hash(), 16) + "}:"
	return &ruleSpec{
		prefix: prefix,
		slot:   redisconn.Slot(prefix),
		avg:    id.threshold == config.ThresholdAvgLocal,
		lease:  true,
		argv: [3]any{
			strconv.FormatFloat(id.count, 'g', -1, 64),
			strconv.FormatInt(id.statIntervalMs, 10),
			avg,
		},
	}
}

// maxKeyValue is the longest value kept in a param window's key as it is;
// a longer one is keyed by its first keepValue bytes, '#' and the SHA-256 of
// the whole (hex, 64 bytes), so every key is short whatever the request
// sends, and the digest is the same on every gateway (it has no seed, and is
// collision resistant: a client cannot make its value share another's
// window). A short value spelled in that form is digested too: kept as it
// is, it would name the long value's window.
const (
	maxKeyValue = 128
	keepValue   = 48
)

func newParamSpec(ns string, id paramIdent) *ruleSpec {
	avg := "0"
	if id.threshold == config.ThresholdAvgLocal {
		avg = "1"
	}
	if unit, ok := id.window.Calendar(); ok {
		loc, err := time.LoadLocation(id.timezone)
		if err != nil {
			// config's validation refuses a zone it cannot load (with the
			// same zone database: the binary's own, time/tzdata).
			loc = time.UTC
		}
		return &ruleSpec{
			// "q:" rather than "p:": a counter, not a window's ring. The
			// closing "}" and the period come after the value (valueKey).
			prefix:   "{" + ns + ":q:" + strconv.FormatUint(id.hash(), 16) + ":",
			perValue: true,
			quota:    true,
			unit:     unit,
			loc:      loc,
			argv:     [3]any{strconv.FormatFloat(id.count, 'g', -1, 64), "0", "q"},
		}
	}
	return &ruleSpec{
		// The closing "}" comes after the value (valueKey).
		prefix:   "{" + ns + ":p:" + strconv.FormatUint(id.hash(), 16) + ":",
		avg:      id.threshold == config.ThresholdAvgLocal,
		perValue: true,
		// A lease is at most K/2048 tokens: below that the script never
		// grants one.
		lease: id.threshold == config.ThresholdAvgLocal || id.count >= 2*ringSlots,
		argv: [3]any{
			strconv.FormatFloat(id.count, 'g', -1, 64),
			strconv.FormatInt(id.duration*1000, 10),
			avg,
		},
	}
}

// valueKey is a param window's key: spec's prefix, the value (or its
// digest, see maxKeyValue), the hash tag's end and suffix (a calendar
// quota's period, else "").
func valueKey(spec *ruleSpec, value, suffix string) string {
	if len(value) <= maxKeyValue && !digestForm(value) {
		return spec.prefix + value + "}" + suffix
	}
	var buf [keepValue + 1 + 2*sha256.Size + 1 + 16]byte // 16: a period's label
	b := appendDigest(buf[:0], value)
	b = append(b, '}')
	b = append(b, suffix...)
	return spec.prefix + string(b)
}

// originKey is a flow rule's window key for an origin: spec's prefix and
// the origin, digested as a param value is past maxKeyValue bytes (an
// origin header may be 64 KB, and so would the key be, in Redis and in
// every call's script arguments).
func originKey(spec *ruleSpec, origin string) string {
	if len(origin) <= maxKeyValue && !digestForm(origin) {
		return spec.prefix + origin
	}
	var buf [keepValue + 1 + 2*sha256.Size]byte
	return spec.prefix + string(appendDigest(buf[:0], origin))
}

// appendDigest appends a long value's form: its first keepValue bytes,
// '#' and its SHA-256 in hex.
func appendDigest(b []byte, value string) []byte {
	sum := sha256.Sum256([]byte(value))
	b = append(b, value[:keepValue]...)
	b = append(b, '#')
	return hex.AppendEncode(b, sum[:])
}

// digestForm reports whether v is spelled as a long value's key: keepValue
// bytes, '#' and 64 lower-case hex digits.
func digestForm(v string) bool {
	if len(v) != keepValue+1+2*sha256.Size || v[keepValue] != '#' {
		return false
	}
	for _, c := range []byte(v[keepValue+1:]) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// specCache maps rule identities to prepared specs. Identities come from
// config, not requests, so it stays small; it is cleared when it reaches
// maxSpecs so that years of reloads cannot grow it.
type specCache struct {
	ns string // the namespace
	mu sync.Mutex
	m  map[ruleIdent]*ruleSpec // guarded by mu
	// p is keyed by the rule's address (a compiled rule's, which does not
	// change) and count, so that a call neither formats nor hashes the
	// rule's key; rules of equal identity at other addresses get specs of
	// their own, with the same Redis prefix.
	p map[paramKey]*ruleSpec // guarded by mu
}

type paramKey struct {
	r     *config.ParamRule
	count float64
}

const maxSpecs = 4096

func (c *specCache) get(r *config.FlowRule) *ruleSpec {
	id := identOf(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[id]; ok {
		return s
	}
	if c.m == nil || len(c.m) >= maxSpecs {
		c.m = make(map[ruleIdent]*ruleSpec)
	}
	s := newSpec(c.ns, id)
	c.m[id] = s
	return s
}

func (c *specCache) param(r *config.ParamRule, count float64) *ruleSpec {
	k := paramKey{r, count}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.p[k]; ok {
		return s
	}
	if c.p == nil || len(c.p) >= maxSpecs {
		c.p = make(map[paramKey]*ruleSpec)
	}
	s := newParamSpec(c.ns, paramIdentOf(r, count))
	c.p[k] = s
	return s
}
