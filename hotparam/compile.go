package hotparam

import (
	"slices"
	"time"

	"sluice/config"
	"sluice/internal/match"
	"sluice/internal/ruleid"
)

// Set is the compiled param rules of one snapshot. It is immutable after
// Compile and safe for concurrent use; the per-value state inside it is
// shared with the next Set for every rule whose definition did not change.
type Set struct {
	rules []config.ParamRule
	ids   ruleid.Index[*rule] // the compiled rules, for the next Compile
	byRes map[string]*Checker
}

// Compile builds the param checkers of one snapshot, carrying over per-value
// state of every rule whose definition (all fields but Line, see
// internal/ruleid) is unchanged in prev (nil at first); identical rules are
// matched in order, so two of them keep two states. The rules are taken as
// config.Load gives them (or config.Defaults, for rules built in code):
// defaulted and validated.
func Compile(rules []config.ParamRule, prev *Set) *Set {
	return CompileWith(rules, prev, Options{})
}

// Options tune a Set. The zero Options are the defaults.
type Options struct {
	// Cluster decides clusterMode rules; nil checks them as local rules.
	Cluster TokenService
	// Now is the instant of the compile on the timeline the Checkers are
	// given (Enter's now): an edited rule's values carry their state over
	// as it stands then (adoptState). A reload (prev not nil) sets it.
	Now int64
}

// TokenService decides clusterMode param rules across gateways
// (sluice/cluster on Redis): n tokens of value's window, of count per
// durationSec (the rule's count, or the item's the value matches). A
// non-nil err means no decision (Redis down or slow): the rule then applies
// locally if rule.ClusterConfig.Fallback(), else the value passes that rule.
// Locally, a global rule's count is this gateway's share, count /
// Gateways() (never below one call a durationSec); an avgLocal count is
// each gateway's as it is. value may alias a buffer the caller reuses after
// the call. Implementations must be safe for concurrent use.
type TokenService interface {
	// AcquireParamLeft takes n tokens of value's window; on a block (ok
	// false, err nil), retry is how long until it can take them (0:
	// unknown). With report, a pass also says what the window has left
	// after it (left; -1: not known) and how long until its oldest pass
	// leaves it (reset), for the RateLimit fields.
	AcquireParamLeft(rule *config.ParamRule, count float64, value string, n int64, report bool) (ok bool, retry time.Duration, left int64, reset time.Duration, err error)
	// AcquireQuota takes n of value's calendar quota (rule.Window day or
	// month): count calls per period. left is what the period has left
	// after the call, reset the time until it ends and period its length
	// (both known even with err). err is as AcquireParam's.
	AcquireQuota(rule *config.ParamRule, count float64, value string, n int64) (ok bool, left int64, reset, period time.Duration, err error)
	// PeekParamLeft reports whether value's window could take n tokens
	// now, taking none (a countOn failure or responseHeader rule lets a
	// call in on it). The results are as AcquireParamLeft's.
	PeekParamLeft(rule *config.ParamRule, count float64, value string, n int64, report bool) (ok bool, retry time.Duration, left int64, reset time.Duration, err error)
	// ChargeParam takes n tokens of value's window after a call's answer,
	// whether or not they fit: the window may be overdrawn, and then
	// refuses calls until its passes leave it (at most one full window of
	// count: see cluster.Service.ChargeParam). err: Redis did not take it.
	ChargeParam(rule *config.ParamRule, count float64, value string, n int64) error
	// CheckQuota is AcquireQuota taking nothing: whether n would fit value's
	// calendar quota now (a countOn failure or responseHeader rule lets a
	// call in on it), with the same figures.
	CheckQuota(rule *config.ParamRule, count float64, value string, n int64) (ok bool, left int64, reset, period time.Duration, err error)
	// ChargeQuota adds n to value's calendar quota after a call's answer,
	// whether or not it fits: the period may be overdrawn, and then refuses
	// the value until its reset. err: Redis did not take it.
	ChargeQuota(rule *config.ParamRule, count float64, value string, n int64) error
	// Gateways is the number of live gateways last seen, at least 1.
	Gateways() int
}

// TokenReturner is a TokenService that can take back a pass's tokens. A
// call whose value a clusterMode rule let through and that a later value,
// rule or guard then blocks (or whose client leaves before it is
// forwarded) passed nowhere: through a TokenReturner, Token.Cancel gives
// its tokens back; else they stay taken until they leave the window. A
// calendar quota's pass goes back through a QuotaReturner.
type TokenReturner interface {
	TokenService
	// AcquireParamStamp is AcquireParamLeft that also says of a pass the
	// stamp of its tokens (0: they cannot be given back).
	AcquireParamStamp(rule *config.ParamRule, count float64, value string, n int64, report bool) (ok bool, retry time.Duration, left int64, reset time.Duration, stamp int64, err error)
	// GiveBackParam gives back the n tokens of value's pass stamped
	// stamp (count as it was asked). It must not wait for the service.
	GiveBackParam(rule *config.ParamRule, count float64, value string, n, stamp int64)
}

// QuotaReturner is a TokenService whose calendar quota passes can be
// taken back: a countOn failure rule with window day or month then holds
// its call's place in the period while the call is in flight, as on a
// rolling window, instead of letting it in on a look.
type QuotaReturner interface {
	// AcquireQuotaStamp is AcquireQuota that also says of a pass the
	// stamp GiveBackQuota takes it back with (0: none).
	AcquireQuotaStamp(rule *config.ParamRule, count float64, value string, n int64) (ok bool, left int64, reset, period time.Duration, stamp int64, err error)
	// GiveBackQuota takes the n calls of the pass stamped stamp back off
	// value's period, unless the period has ended.
	GiveBackQuota(rule *config.ParamRule, count float64, value string, n, stamp int64)
}

// StampedCharger is a QuotaReturner that can charge the period a held pass
// was stamped in: a figure's call let in before its period's reset and
// answered after it is charged to the period it was let in on (ended:
// nothing more), not to the next one.
type StampedCharger interface {
	ChargeQuotaStamp(rule *config.ParamRule, count float64, value string, n, stamp int64) error
}

// CompileWith is Compile with Options.
func CompileWith(rules []config.ParamRule, prev *Set, opts Options) *Set {
	var old *ruleid.Index[*rule]
	if prev != nil {
		old = &prev.ids
	}
	s := &Set{
		rules: append([]config.ParamRule(nil), rules...),
		byRes: map[string]*Checker{},
	}
	kept := make(map[*rule]bool)
	var fresh []*rule // changed rules, which may carry on from an old one's state: adoptState
	for _, pr := range rules {
		k := config.RuleID(pr)
		r, ok := s.ids.Reuse(old, k)
		if !ok {
			r = compileRule(pr)
			fresh = append(fresh, r)
		}
		kept[r] = ok
		s.ids.Add(k, r)
		c := s.byRes[pr.Resource]
		if c == nil {
			c = &Checker{cluster: opts.Cluster}
			c.giver, _ = opts.Cluster.(TokenReturner) // once, not per call
			s.byRes[pr.Resource] = c
		}
		c.rules = append(c.rules, r)
		if r.header != "" && !slices.Contains(c.headers, r.header) {
			c.headers = append(c.headers, r.header)
		}
		c.failures = c.failures || r.after && r.header == ""
	}
	if prev != nil {
		adoptState(fresh, prev, kept, opts)
	}
	return s
}

// adoptState lets each changed rule in fresh carry on from what a rule of
// prev let through: a rule of prev that no rule kept (kept) and whose
// values mean the same (stateID), each adopted once. It pairs in two
// passes: first an old rule of the same durationSec (a count, burst or
// item edited), then, of the rules left, one whose durationSec changed,
// only where one old and one new rule of that stateID are left, so the
// pair cannot be mistaken. One key often has a rule a second and a rule a
// minute: paired by order, a rule a second added in front took over the
// minute rule's spent budget, and the minute rule, edited, started with a
// fresh one (a reload audit: 20 passes, where the spent budget left none).
// A concurrency rule takes the old rule's table, whose counters the calls
// in flight end in, and sees them end: as with an edited flow concurrency
// rule, an operator who lowers a limit in an incident lets no call in on
// top of the calls already running. A qps rule takes over each tracked
// value's state as it stands at opts.Now, under its new numbers
// (rule.carry): a bucket keeps the tokens the value spent, a throttle
// queue its last slot, and operators keep seeing who was limited. Without
// it a changed rule gave every value a full bucket, so each value
// attacking in an incident got a new burst the moment its count was
// lowered. The old rule keeps serving until the swap, and its table is
// read as it serves: what it lets through after this compile, and what
// calls it let in give back to it or take after their answers, is not
// carried.
func adoptState(fresh []*rule, prev *Set, kept map[*rule]bool, opts Options) {
	old := func(r *rule) []*rule {
		var out []*rule
		if c := prev.byRes[r.resource]; c != nil {
			id := stateID(r)
			for _, o := range c.rules {
				if !kept[o] && stateID(o) == id {
					out = append(out, o)
				}
			}
		}
		return out
	}
	var left []*rule
	for _, r := range fresh {
		os := old(r)
		if i := slices.IndexFunc(os, func(o *rule) bool { return o.cfg.DurationSec == r.cfg.DurationSec }); i >= 0 {
			r.adopt(os[i], kept, opts)
		} else {
			left = append(left, r)
		}
	}
	for _, r := range left {
		id := stateID(r)
		alike := 0 // the rules left of r's stateID, r among them
		for _, n := range left {
			if stateID(n) == id {
				alike++
			}
		}
		if os := old(r); len(os) == 1 && alike == 1 {
			r.adopt(os[0], kept, opts)
		}
	}
}

// adopt makes r, a changed rule, carry on from o (adoptState).
func (r *rule) adopt(o *rule, kept map[*rule]bool, opts Options) {
	kept[o] = true
	if r.kind == kindInFlight {
		r.table = o.table
		return
	}
	now, share, was := opts.Now, r.localShare(opts.Cluster), o.localShare(opts.Cluster)
	r.table.Carry(o.table, func(dst, src *value) bool {
		return r.carry(o, dst, src, now, share, was)
	})
}

// stateID is what a rule's values mean, whatever its numbers: which values
// it tracks (resource, param, match), the item each one matched (items by
// value and match, in order: a value keeps its item's index, value.param),
// what its state word holds (kind) and, for a calendar quota, the period
// its local bucket counts (window, timezone). A concurrency rule's table
// is shared, with its Init and cap (maxTrackedValues), so the cap is part
// of it there; another rule's values are carried into a table of its own
// cap.
func stateID(r *rule) ruleid.Key {
	pr := r.cfg
	items := make([]config.ParamItem, len(pr.Items))
	for i, it := range pr.Items {
		items[i] = config.ParamItem{Value: it.Value, Match: it.Match}
	}
	id := struct {
		Resource string
		Param    config.Key
		Match    config.ParamMatch
		Kind     kind
		Cap      int
		Window   config.Window
		Timezone string
		Items    []config.ParamItem
	}{Resource: pr.Resource, Param: pr.Param, Match: pr.Match, Kind: r.kind, Items: items}
	if r.kind == kindInFlight {
		id.Cap = pr.MaxTrackedValues
	}
	if r.calendar {
		id.Window, id.Timezone = pr.Window, pr.Timezone
	}
	return ruleid.Of(id)
}

// compileRule compiles a rule that config has defaulted and validated
// (enums, ranges, duplicate items, counts <= config.MaxCount, which keeps a
// concurrency count within an int64, patterns that compile). Regexes are
// compiled here, once per rule and snapshot.
func compileRule(pr config.ParamRule) *rule {
	r := &rule{
		cfg:      &pr,
		resource: pr.Resource,
		key:      pr.Param,
		dryRun:   pr.DryRun,
		window:   time.Duration(pr.DurationSec) * time.Second,
		maxQueue: pr.MaxQueueingTimeMs * int64(time.Millisecond),
	}
	switch {
	case pr.Grade == config.GradeConcurrency:
		r.kind = kindInFlight
	case pr.ControlBehavior == config.BehaviorThrottle:
		r.kind = kindQueue
	case pr.ControlBehavior == config.BehaviorReject:
		r.kind = kindBucket
	}
	if unit, ok := pr.Window.Calendar(); ok {
		// A calendar quota is decided in Redis. Should Redis fail and the
		// rule fall back, it limits each value locally to its share of
		// count per period, reset when the period ends, in a bucket that
		// the cluster's passes keep charged (docs/rules.md#calendar-quotas).
		r.calendar = true
		r.window = unit.Nominal()
	}
	r.match = mustMatch(pr.Match.Matcher())
	r.items = make(map[string]int32, len(pr.Items))
	for j, it := range pr.Items {
		if !it.Class() {
			r.items[it.Value] = int32(j + 1)
			continue
		}
		r.classes = append(r.classes, class{m: mustMatch(it.Matcher()), param: int32(j + 1)})
	}
	window := float64(r.window)
	burst := float64(pr.BurstCount)
	span := func(count float64) float64 {
		if r.calendar {
			// The fallback's bucket counts a period's calls: a token
			// comes back only after two nominal periods, so none within
			// the period (a day of 25 hours included), and the bucket is
			// made full again at the reset (rule.turnPeriod).
			return 2 * window * max(count, 1)
		}
		return window
	}
	r.params = append(r.params, newParam(pr.Count, span(pr.Count), burst))
	for _, it := range pr.Items {
		r.params = append(r.params, newParam(it.Count, span(it.Count), burst))
	}
	// config lets only a qps reject rule count after the answer.
	if r.after = pr.CountOn.AfterAnswer() && r.kind == kindBucket; r.after {
		r.header = pr.CountOn.Header()
		r.failures = config.NewStatusSet(pr.FailureStatuses)
	}
	// Only a rate can be counted in the cluster (config refuses the rest).
	r.cluster = pr.ClusterMode && r.kind == kindBucket
	r.table = newTable(r, pr.MaxTrackedValues)
	return r
}

func newParam(count, window, burst float64) param {
	if count == 0 {
		return param{never: true}
	}
	emission := window / count
	// A bucket holds at least one token, so that a count below 1 (0.5 per
	// second) means one call every 1/count windows rather than none.
	capacity := max(count+burst, 1)
	return param{
		count:    count,
		emission: emission,
		tau:      nanos(capacity * emission),
		inFlight: int64(count),
	}
}

// For returns the checker for a resource's param rules (in file order), nil
// if it has none. Call it once per route when building a snapshot.
func (s *Set) For(resource string) *Checker {
	if s == nil {
		return nil
	}
	return s.byRes[resource]
}

// Rules returns the rules the Set was compiled from, as given. The caller
// must not modify the slice.
func (s *Set) Rules() []config.ParamRule {
	if s == nil {
		return nil
	}
	return s.rules
}

// Tracked returns how many values the resource's rules track now, summed
// over its rules (for tests and metrics). It takes every shard lock in turn.
func (s *Set) Tracked(resource string) int {
	c := s.For(resource)
	if c == nil {
		return 0
	}
	n := 0
	for _, r := range c.rules {
		n += r.table.Len()
	}
	return n
}

// mustMatch returns a validated rule's matcher. config's validation
// compiles every pattern with the same internal/match, so an error here is
// a rule that skipped validation: a programmer error.
func mustMatch(m match.Matcher, err error) match.Matcher {
	if err != nil {
		panic("hotparam: a param rule's pattern that config's validation would refuse: " + err.Error())
	}
	return m
}
