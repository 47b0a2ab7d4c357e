// Package circuit implements degradeRules: Sentinel-style circuit breakers
// that cut a resource off while its upstream is slow or failing, then let a
// few probe calls decide when it has recovered.
//
// Each rule has a breaker with a sliding window of statIntervalMs (ten
// buckets) counting completed calls and the bad ones among them (slow for
// slowRatio, failed for errorRatio and errorCount: an answer in the rule's
// errorStatuses, default 5xx, or no answer at all). Closed trips to Open when
// the window holds at least minRequestAmount calls and the strategy's
// condition holds (see tripped). Open blocks everything for retryTimeoutMs,
// then becomes HalfOpen: exactly probeNum probes pass (default 1); when all
// have succeeded the breaker closes with an empty window, and the first
// failure opens it for retryTimeoutMs more. The next half-open spell waits
// for the probes of the last one still out.
//
// The package knows nothing of HTTP beyond status numbers and never reads
// the clock: callers pass now (ns on a monotonic timeline with any origin),
// the response time and the status.
//
// Layer 4 of docs/architecture.md: it imports limiter, config and internal/
// mechanisms; knows nothing of HTTP.
package circuit

import (
	"time"

	"sluice/config"
	"sluice/internal/ruleid"
	"sluice/limiter"
)

// maxRulesPerResource bounds the rules of one resource so that a Token can
// mark its probes in one word (and thus never allocate); config refuses a
// file with more.
const maxRulesPerResource = config.MaxDegradeRulesPerResource

// A Token's probes word has 64 bits: this fails to compile if the limit grows past it.
var _ [64 - maxRulesPerResource]struct{}

// Set is the compiled breakers of one rules snapshot. It is immutable after
// Compile (the breakers inside carry mutable, goroutine-safe state) and safe
// for concurrent use. A nil *Set has no rules.
type Set struct {
	byResource map[string]*Breakers
	all        []*breaker             // file order
	ids        ruleid.Index[*breaker] // for the next Compile
	// resources are every resource of prev or this Set, and onChange the
	// observer: what Install attaches.
	resources map[string]*resource
	onChange  func(resource string, from, to State)
}

// Breakers is the breakers of one resource, all of which must let a call
// through. A nil *Breakers lets everything through at no cost. Safe for
// concurrent use.
type Breakers struct {
	list []*breaker
}

// Compile builds the breakers of one snapshot; a rule whose definition (all
// fields but Line, see internal/ruleid) is unchanged keeps its breaker
// (state, window) from prev (nil at first), identical rules in order.
//
// onChange (may be nil) is told each change of a resource's state, which is
// the worst state of its breakers (open > half-open > closed; with one rule,
// simply the breaker's state): once per change, in order, from and to never
// equal, with locks held, so it must be quick and must not call back into
// the Set (logging and setting a metric are fine). A resource starts Closed
// without a report. Breakers kept from prev report to the new onChange, and
// Compile itself reports the resources whose state the reload changes: a rule
// edited while open gets a new, closed breaker; a resource whose rules are
// all removed reports Closed (and nothing after). That changes state shared
// with prev's Set, so Compile only builds: Install does it, once the Set is
// sure to be put in force. A Set that is dropped (a reload that failed after
// Compile) leaves prev's resources, their observer and their reported
// states as they were.
//
// The rules are taken as config.Load gives them (or config.Defaults, for
// rules built in code): defaulted and validated (strategies, ranges, at
// most 64 rules per resource).
func Compile(rules []config.DegradeRule, prev *Set, onChange func(resource string, from, to State)) *Set {
	var old *ruleid.Index[*breaker]
	resources := map[string]*resource{}
	if prev != nil {
		old = &prev.ids
		for _, b := range prev.all {
			resources[b.resource] = b.res
		}
	}
	s := &Set{byResource: map[string]*Breakers{}}
	for _, r := range rules {
		key := config.RuleID(r)
		b, ok := s.ids.Reuse(old, key)
		if !ok {
			res := resources[r.Resource]
			if res == nil {
				res = &resource{name: r.Resource}
				resources[r.Resource] = res
			}
			b = newBreaker(r, res)
		}
		s.ids.Add(key, b)
		bs := s.byResource[r.Resource]
		if bs == nil {
			bs = &Breakers{}
			s.byResource[r.Resource] = bs
		}
		bs.list = append(bs.list, b)
		s.all = append(s.all, b)
	}
	s.resources, s.onChange = resources, onChange
	return s
}

// Install puts s's breakers in their resources, in place of prev's (those
// Compile was given), and reports the states the change makes. Call it once,
// just before s goes in force.
func (s *Set) Install() {
	// Every resource of prev or s (a reused breaker's resource is in
	// resources: it came from prev).
	for name, res := range s.resources {
		var list []*breaker
		if bs := s.byResource[name]; bs != nil {
			list = bs.list
		}
		res.attach(list, s.onChange)
	}
	s.resources = nil // prev's, which only Install needed
}

// For returns the breakers of resource, or nil if it has no degrade rules.
// Resolve it once per route, not per request.
func (s *Set) For(resource string) *Breakers {
	if s == nil {
		return nil
	}
	return s.byResource[resource]
}

// States returns the worst state (open > half-open > closed) of each
// resource's breakers, for the sluice_circuit_state{resource} metric.
func (s *Set) States() map[string]State {
	if s == nil {
		return map[string]State{}
	}
	m := make(map[string]State, len(s.byResource))
	for res, bs := range s.byResource {
		m[res] = summary(bs.list)
	}
	return m
}

// Token is one call that passed Enter. Exactly one of Exit, Abandon or
// Cancel must be called on it (a second call, or any on the zero Token, does
// nothing):
// a half-open probe that is never finished keeps its breaker half-open. A
// Token is used by one goroutine.
type Token struct {
	bs     *Breakers
	probes uint64 // bit i: this call is bs.list[i]'s half-open probe
}

// Enter checks a call against every breaker of the resource. A blocked call
// gets Reason limiter.ReasonDegrade and RetryAfter = the time its breaker stays
// open (at least 1 ms), or none while a probe decides: its outcome, which
// may take the route's whole timeout, says when (SPEC §4: Retry-After only
// when the limiter can tell). A passed call must be
// finished with the Token's Exit, Abandon or Cancel. Enter allocates nothing.
func (b *Breakers) Enter(now int64) (Token, limiter.Verdict) {
	if b == nil {
		return Token{}, limiter.Verdict{}
	}
	var probes uint64
	for i, br := range b.list {
		pass, probe, left := br.enter(now)
		if !pass {
			// An earlier breaker's probe will not be forwarded: give it back.
			Token{bs: b, probes: probes}.cancel()
			v := limiter.Verdict{Blocked: true, Reason: limiter.ReasonDegrade}
			if left > 0 {
				v.RetryAfter = max(time.Duration(left), time.Millisecond)
			}
			return Token{}, v
		}
		if probe {
			probes |= 1 << i
		}
	}
	return Token{bs: b, probes: probes}, limiter.Verdict{}
}

// Room is when a call, which some rule refused retry ns from now (0: it
// cannot tell), would find every breaker of the resource letting calls
// through too: retry, or later while a breaker stays open longer. A
// half-open breaker whose probes are out cannot tell, and is left out.
func (b *Breakers) Room(now, retry int64) int64 {
	if b == nil || retry <= 0 {
		return retry
	}
	for _, br := range b.list {
		if br.state.Load() == sOpen {
			retry = max(retry, br.retryAt.Load()-now)
		}
	}
	return retry
}

// Exit finishes a forwarded call: rt is its response time, status the
// upstream's answer, or 0 if it gave none (it could not be reached, reset
// the connection or timed out), which is always an error. Each breaker
// counts the call as failed when status is in its rule's errorStatuses
// (default 5xx). Exit records the call in every breaker's window and makes
// the transition that implies (a probe closes or re-opens its breaker).
func (t *Token) Exit(now int64, rt time.Duration, status int) {
	if t.bs == nil {
		return
	}
	for i, br := range t.bs.list {
		br.exit(now, rt, status, t.probes&(1<<i) != 0)
	}
	*t = Token{}
}

// unanswered is the status an abandoned slow call is recorded with: its
// slowness is certain, an error is not (no status set holds it).
const unanswered = -1

// Abandon finishes a forwarded call whose client went away before the
// upstream answered. Its outcome is unknown, so it counts only where it is
// already certain: for a slowRatio breaker, a call that ran longer than
// maxAllowedRtMs is slow (and, as a probe, re-opens the breaker). Elsewhere
// nothing is recorded and a half-open probe slot is given back, so that an
// impatient client can neither close a breaker in front of a hanging upstream
// nor keep it half-open.
func (t *Token) Abandon(now int64, rt time.Duration) {
	if t.bs == nil {
		return
	}
	for i, br := range t.bs.list {
		probe := t.probes&(1<<i) != 0
		switch {
		case br.strategy == config.DegradeSlowRatio && rt > br.maxRt:
			br.exit(now, rt, unanswered, probe)
		case probe:
			br.cancelProbe()
		}
	}
	*t = Token{}
}

// Cancel finishes a call that was not forwarded after all (a later check
// blocked it or the client left): nothing is recorded and a half-open probe
// slot is given back, so the next call may probe.
func (t *Token) Cancel(now int64) {
	if t.bs == nil {
		return
	}
	t.cancel()
	*t = Token{}
}

func (t Token) cancel() {
	for i, br := range t.bs.list {
		if t.probes&(1<<i) != 0 {
			br.cancelProbe()
		}
	}
}
