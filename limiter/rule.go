package limiter

import (
	"math"
	"strings"
	"sync/atomic"
	"time"

	"sluice/config"
	"sluice/internal/lru"
	"sluice/internal/throttle"
	"sluice/limiter/window"
)

// behavior is a rule's compiled grade and control behaviour.
type behavior uint8

const (
	bReject behavior = iota
	bWarmUp
	bThrottle
	bWarmUpThrottle
	bConcurrency
)

type limitKind uint8

const (
	limitDefault limitKind = iota
	limitSpecific
	limitOther
)

// ruleDef is the immutable compiled form of one rule definition. Key states
// point to it, so it outlives the Flow that compiled it when a reload keeps it.
type ruleDef struct {
	behavior   behavior
	relate     bool
	count      float64
	intervalNs int64
	maxQueueNs int64
	perToken   float64 // throttle spacing of one token at count, ns
	storeNs    int64   // throttle: burstCount one-token spacings, what an idle queue stores
	dryRun     bool
	warm       warmParams
	// The reject window: winLimit whole calls per winNs. For a count under
	// one a call per interval, the interval is stretched to the fewest whole
	// intervals that hold one call (0.5 a second: 1 per 2 s), since a window
	// of whole calls could pass none; else it is count (rounded down) per
	// statIntervalMs. The RateLimit fields state this.
	winNs    int64
	winLimit float64
	// clusterHolds is the most tokens a clusterMode rule's window in Redis
	// holds, as its script counts whole calls (window.ClusterWholeCalls);
	// +Inf for avgLocal, whose window grows with the live gateways.
	clusterHolds float64
}

// keyState is the limiting state of one rule for one key (all callers, or one
// origin). Only the parts its behaviour uses are allocated.
type keyState struct {
	def    *ruleDef
	win    *window.Exact  // reject, warmUp: passes
	warm   *warmState     // warmUp, warmUpThrottle
	latest atomic.Int64   // throttle: the last passed call's slot (ns; past while burstCount permits are stored)
	holes  throttle.Holes // throttle: slots given back inside the queue
	// inflight counts a concurrency rule's calls in flight (nil for other
	// behaviours): a pointer, so that a changed rule's new state counts the
	// calls its old one let in (adoptState).
	inflight *atomic.Int64
	pins     atomic.Int64 // calls in flight holding it (other-rule LRU)
	// alone: until then (ns), win holds passes this gateway decided alone
	// while the token service failed (a clusterMode rule's fallback), which
	// Redis never counted; a cluster pass must fit win too until they leave.
	alone  atomic.Int64
	pooled bool // lives in an other-rule LRU: pinned while in use
}

func (s *keyState) pin() { s.pins.Add(1) }

// unpin releases a pin taken by the LRU (a no-op for states not pooled).
func (s *keyState) unpin() {
	if s != nil && s.pooled {
		s.pins.Add(-1)
	}
}

func (s *keyState) busy() bool {
	return s.pins.Load() > 0 || s.inflight != nil && s.inflight.Load() > 0
}

func newKeyState(d *ruleDef) *keyState {
	s := &keyState{def: d}
	switch d.behavior {
	case bReject:
		s.win = window.NewExact(d.winNs, d.winLimit)
	case bWarmUp:
		s.win = window.NewExact(d.intervalNs, d.count)
		s.warm = newWarmState(d.warm)
	case bWarmUpThrottle:
		s.warm = newWarmState(d.warm)
	case bConcurrency:
		s.inflight = new(atomic.Int64)
	}
	s.latest.Store(math.MinInt64 / 2)
	s.alone.Store(math.MinInt64)
	return s
}

// windowNs is how long a pass stays in a reject or warmUp window.
func (d *ruleDef) windowNs() int64 {
	if d.behavior == bReject {
		return d.winNs
	}
	return d.intervalNs
}

// ruleState is everything one rule keeps across reloads.
type ruleState struct {
	def      *ruleDef
	shared   *keyState             // limitApp default
	byOrigin map[string]*keyState  // specific origins
	others   *lru.Cache[*keyState] // limitApp other: one per origin
}

// rule is one rule compiled into a Flow.
type rule struct {
	cfg     *config.FlowRule
	st      *ruleState
	limit   limitKind
	chain   string          // entrance it applies to (chain strategy), else ""
	ref     string          // related resource (relate strategy)
	apps    map[string]bool // limitApp's origins (specific)
	cluster bool
}

// compileDef compiles a rule as config.Load gives it, or config.Defaults
// gives a rule built in code: defaults filled in, every enum and range (such
// as count <= config.MaxCount) validated. It takes the rule as it is.
func compileDef(r *config.FlowRule) *ruleDef {
	d := &ruleDef{count: r.Count, dryRun: r.DryRun, relate: r.Strategy == config.StrategyRelate}
	d.intervalNs = r.StatIntervalMs * int64(time.Millisecond)
	d.maxQueueNs = r.MaxQueueingTimeMs * int64(time.Millisecond)
	if r.Grade == config.GradeConcurrency {
		d.behavior = bConcurrency
		return d
	}
	if d.relate {
		return d // checked against the related node; behaviour does not apply
	}
	switch r.ControlBehavior {
	case config.BehaviorReject:
		d.behavior = bReject
	case config.BehaviorWarmUp:
		d.behavior = bWarmUp
	case config.BehaviorThrottle:
		d.behavior = bThrottle
	case config.BehaviorWarmUpThrottle:
		d.behavior = bWarmUpThrottle
	}
	if d.behavior == bWarmUp || d.behavior == bWarmUpThrottle {
		minRate := 0.0
		if d.behavior == bWarmUp {
			minRate = min(r.Count, 1)
		}
		d.warm = newWarmParams(r.Count, float64(r.WarmUpPeriodSec)*1e9/float64(d.intervalNs), r.ColdFactor, minRate)
	}
	d.perToken = math.Inf(1) // count 0: nothing passes
	if r.Count > 0 {
		d.perToken = float64(d.intervalNs) / r.Count
	}
	if d.behavior == bThrottle && r.BurstCount > 0 {
		d.storeNs = int64(min(float64(r.BurstCount)*math.Ceil(d.perToken), math.MaxInt64/4))
	}
	d.winNs, d.winLimit = window.WholeCalls(r.Count, d.intervalNs)
	_, d.clusterHolds = window.ClusterWholeCalls(r.Count, d.intervalNs)
	if r.ClusterConfig.ThresholdType == config.ThresholdAvgLocal {
		d.clusterHolds = math.Inf(1)
	}
	return d
}

// quota is what the RateLimit fields state for the rule: the reject
// window's whole calls, else count per statIntervalMs.
func (d *ruleDef) quota() (limit float64, window time.Duration) {
	if d.behavior == bReject {
		return d.winLimit, time.Duration(d.winNs)
	}
	return d.count, time.Duration(d.intervalNs)
}

func newRuleState(d *ruleDef, r *config.FlowRule, maxOrigins int) *ruleState {
	st := &ruleState{def: d}
	if d.relate {
		return st // no own counters
	}
	switch limitOf(r) {
	case limitDefault:
		st.shared = newKeyState(d)
	case limitSpecific:
		st.byOrigin = make(map[string]*keyState)
		for _, o := range r.LimitApps() {
			st.byOrigin[o] = newKeyState(d)
		}
	case limitOther:
		st.others = newLRU(maxOrigins, func() *keyState {
			s := newKeyState(d)
			s.pooled = true
			return s
		})
	}
	return st
}

// adoptState lets each changed rule in fresh carry on from what a rule of
// prev let through: one of the same resource, strategy, refResource, kind
// of limitApp and behaviour whose state no rule kept (kept), each adopted
// once. A concurrency rule counts the calls in flight (they share the old
// counter: they end in it, and the new rule sees them end); a reject rule
// counts the passes still in its window (the old window's newest passes,
// under the new count and interval: window.Exact.Resized); a throttle
// rule queues after the old queue's last slot, spaced by its new rate.
// Without it a changed rule started empty, so an operator who lowered a
// limit during an incident let the new limit's worth of calls in on top of
// those already let in: 20 a second lowered to 10 passed 30 in one real
// second. A limitApp other rule's per-origin states start afresh, and so
// do warm-up rules (their cold start is the rule's own), and the passes
// the old rules let in between this Compile and the swap.
func adoptState(fresh []*rule, prev *Flow, kept map[*ruleState]bool) {
	for _, cr := range fresh {
		for _, old := range prev.byRes[cr.cfg.Resource] {
			o := old.st
			if kept[o] || o.def.behavior != cr.st.def.behavior || o.def.relate || old.limit != cr.limit ||
				old.cfg.Strategy != cr.cfg.Strategy || old.cfg.RefResource != cr.cfg.RefResource {
				continue
			}
			kept[o] = true
			adoptKey(cr.st.shared, o.shared)
			for origin, ks := range cr.st.byOrigin {
				adoptKey(ks, o.byOrigin[origin])
			}
			break
		}
	}
}

// adoptKey carries was's state into ks, a changed rule's (see adoptState).
func adoptKey(ks, was *keyState) {
	if ks == nil || was == nil {
		return
	}
	switch ks.def.behavior { // warm-up rules start cold: nothing to carry
	case bConcurrency:
		ks.inflight = was.inflight
	case bReject:
		ks.win = was.win.Resized(ks.def.winNs, ks.def.winLimit)
	case bThrottle:
		ks.latest.Store(was.latest.Load())
	}
}

func limitOf(r *config.FlowRule) limitKind {
	switch strings.TrimSpace(r.LimitApp) {
	case config.LimitAppDefault:
		return limitDefault
	case config.LimitAppOther:
		return limitOther
	}
	return limitSpecific
}
