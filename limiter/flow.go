package limiter

import (
	"maps"
	"slices"
	"sync"
	"time"

	"sluice/config"
	"sluice/internal/lru"
	"sluice/internal/ruleid"
)

// Options tune a Flow. The zero Options are the defaults.
type Options struct {
	// MaxOrigins caps the distinct origins tracked per resource node and per
	// "other" rule (default 10000); past it the least recently used origin with
	// no call in flight is forgotten.
	MaxOrigins int
	// OriginBudget caps the origins the statistics track over every
	// resource of the snapshot (default 100000): a resource's share is
	// OriginBudget / Resources, at most MaxOrigins and at least
	// minOriginShare. Per-origin statistics are for operators; a client
	// sending made-up origins to each of many routes must not hold
	// MaxOrigins statistics nodes per route (about 630 bytes each).
	OriginBudget int
	// Resources is how many resources the snapshot names (its routes', API
	// groups' and rules'), for the share; the rules' alone when it says fewer.
	Resources int
	// Cluster decides clusterMode rules; nil checks them as local rules.
	Cluster TokenService
	// OriginFrom names what the origins are read from (origin.from). A
	// Flow compiled with another than its prev's counts per origin afresh:
	// the old origins name callers of another kind (and, read from a
	// credential, would be listed as if they were not one).
	OriginFrom string
}

// TokenService decides clusterMode rules across gateways (sluice/cluster on
// Redis). key is "" for a resource-wide rule, else the origin. A non-nil err
// means no decision (Redis down or slow): the rule then applies locally if
// rule.ClusterConfig.Fallback(), else the call passes that rule. Locally, a
// global rule's count is shared by the gateways: each limits at count /
// Gateways() (never below one call an interval), so the fleet still passes
// about count; an avgLocal rule's count is each gateway's already. Cluster
// mode is qps-only. Implementations must be safe for concurrent use.
type TokenService interface {
	// AcquireFlow takes n tokens of rule for key; on a block (ok false,
	// err nil), retry is how long until the window can take them (0:
	// unknown), for Retry-After. With report, a pass also says what the
	// window has left after it (left; -1: not known) and how long until
	// its oldest pass leaves it (reset), for the RateLimit fields.
	AcquireFlow(rule *config.FlowRule, key string, n int64, report bool) (ok bool, retry time.Duration, left int64, reset time.Duration, err error)
	// Gateways is the number of live gateways last seen, at least 1.
	Gateways() int
}

// ResumeSkewer is a TokenService that says how much later than another
// gateway one may notice it answer again (sluice/cluster: its probe's
// longest backoff and one round trip). Until then a gateway still deciding
// alone passes its share, which the service never sees; so a gateway that
// resumed keeps its clusterMode rules to its share for a window and that
// long after it last decided alone, until those passes have left the
// window. Without it, a gateway keeps to its share for a window only.
type ResumeSkewer interface {
	ResumeSkew() time.Duration
}

// TokenReturner is a TokenService that can take back a pass's tokens.
// A call that a clusterMode rule let through and that a later rule or
// guard then blocks (or whose client leaves before it is forwarded)
// passed nowhere: through a TokenReturner its tokens are given back, else
// they stay taken until they leave the window.
type TokenReturner interface {
	TokenService
	// AcquireFlowStamp is AcquireFlow that also says of a pass the stamp
	// of its tokens (0: they cannot be given back).
	AcquireFlowStamp(rule *config.FlowRule, key string, n int64, report bool) (ok bool, retry time.Duration, left int64, reset time.Duration, stamp int64, err error)
	// GiveBackFlow gives back the n tokens of a pass stamped stamp. It
	// must not wait for the service.
	GiveBackFlow(rule *config.FlowRule, key string, n, stamp int64)
}

// Flow is the flow checker of one config snapshot: compiled rules, their
// state and the statistics nodes. Build it with Compile (the zero Flow is not
// usable); all methods are safe for concurrent use. State outlives a Flow when
// the next Compile keeps it, so calls entered through an old Flow's Checker
// end correctly after a reload.
type Flow struct {
	rules  []config.FlowRule
	byRes  map[string][]*rule // in file order
	named  map[string]map[string]bool
	states ruleid.Index[*ruleState] // for the next Compile
	opts   Options
	share  int // how many origins each resource's statistics track at most
	// originsAfresh: prev read origins from elsewhere (Options.OriginFrom),
	// so its resource nodes' per-origin statistics are not carried.
	originsAfresh bool

	mu    sync.Mutex // guards nodes, ents, oldNodes and oldEnts
	nodes map[string]*resNode
	ents  map[entKey]*statNode
	// oldNodes and oldEnts are the previous Flow's nodes, until Seal. A
	// node is taken from them only when this snapshot asks for its
	// resource or entrance (a rule, a relate rule's refResource, Checker,
	// Track), so a resource the new rules no longer name is left behind
	// rather than listed, and kept in memory, for ever.
	oldNodes map[string]*resNode
	oldEnts  map[entKey]*statNode
}

// resNode is a resource's statistics: all callers, and per origin, at
// most share of them.
type resNode struct {
	all     *statNode
	origins *lru.Cache[*statNode]
	share   int
}

// minOriginShare is the fewest origins a resource's statistics track,
// however many resources share the budget.
const minOriginShare = 8

// originShare is one resource's share of opts' origin budget.
func originShare(opts Options, resources int) int {
	return min(max(opts.OriginBudget/max(resources, 1), minOriginShare), opts.MaxOrigins)
}

// keepsShare reports whether statistics tracking at most had origins may
// go on as a resource's with share: a share that moved by less than half
// keeps the origins tracked, so adding a route does not clear every
// resource's per-origin statistics.
func keepsShare(had, share int) bool { return share >= had/2 && share <= had*2 }

type entKey struct{ entrance, resource string }

// Compile builds the flow checker of one config snapshot. It carries over
// from prev (nil at first) the state (windows, warm-up tokens, throttle queue
// position, in-flight counts, per-origin state) of every rule whose definition
// (all fields but Line, see internal/ruleid) is unchanged, matched by
// definition and occurrence index for identical duplicates; a changed
// concurrency rule keeps counting the calls in flight, a changed reject rule
// the passes in its window and a changed throttle rule its queue's last
// slot (adoptState). A resource's
// statistics node, by resource name, and an entrance's, by entrance and
// resource, carry over when the new snapshot names them: its rules (and
// relate rules' refResource) here, its routes and API groups by Checker and
// Track before Seal. Any other node of prev is dropped: Stats no longer
// lists it, and it lives on only while calls entered through prev hold it.
// The rules are taken as config.Load gives them (or config.Defaults, for
// rules built in code): defaulted and validated.
func Compile(rules []config.FlowRule, prev *Flow, opts Options) *Flow {
	if opts.MaxOrigins <= 0 {
		opts.MaxOrigins = 10000
	}
	if opts.OriginBudget <= 0 {
		opts.OriginBudget = 100000
	}
	f := &Flow{
		rules: slices.Clone(rules),
		byRes: make(map[string][]*rule),
		named: make(map[string]map[string]bool),
		opts:  opts,
		nodes: make(map[string]*resNode),
		ents:  make(map[entKey]*statNode),
	}
	named := make(map[string]bool, len(rules))
	for _, r := range rules {
		named[r.Resource] = true
		if r.RefResource != "" && r.Strategy == config.StrategyRelate {
			named[r.RefResource] = true
		}
	}
	f.share = originShare(opts, max(opts.Resources, len(named)))
	if prev != nil {
		f.originsAfresh = prev.opts.OriginFrom != opts.OriginFrom
		// Copies: prev stays in force (and may still Track) until the
		// new snapshot is swapped in, or for good if its build fails.
		prev.mu.Lock()
		f.oldNodes, f.oldEnts = maps.Clone(prev.nodes), maps.Clone(prev.ents)
		prev.mu.Unlock()
	}
	var old *ruleid.Index[*ruleState]
	if prev != nil {
		old = &prev.states
	}
	kept := make(map[*ruleState]bool)
	var fresh []*rule // changed rules that carry on from an old one's state: adoptState
	for i := range f.rules {
		r := &f.rules[i]
		d := compileDef(r)
		k := config.RuleID(*r)
		st, ok := f.states.Reuse(old, k)
		if !ok {
			st = newRuleState(d, r, opts.MaxOrigins)
		}
		kept[st] = ok
		f.states.Add(k, st)
		cr := &rule{cfg: r, st: st, limit: limitOf(r), cluster: r.ClusterMode && opts.Cluster != nil && d.behavior != bConcurrency}
		if !ok && !d.relate {
			fresh = append(fresh, cr)
		}
		switch r.Strategy {
		case config.StrategyChain:
			cr.chain = r.RefResource
		case config.StrategyRelate:
			cr.ref = r.RefResource
			f.resNode(r.RefResource)
		}
		if cr.limit == limitSpecific {
			cr.apps = make(map[string]bool)
			if f.named[r.Resource] == nil {
				f.named[r.Resource] = make(map[string]bool)
			}
			for _, o := range r.LimitApps() {
				f.named[r.Resource][o] = true
				cr.apps[o] = true
			}
		}
		f.byRes[r.Resource] = append(f.byRes[r.Resource], cr)
		f.resNode(r.Resource)
	}
	if prev != nil {
		adoptState(fresh, prev, kept)
	}
	return f
}

// resNode returns the statistics of resource: its own, the previous Flow's
// (before Seal), or new ones.
func (f *Flow) resNode(resource string) *resNode {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[resource]
	if n == nil {
		if n = f.oldNodes[resource]; n == nil {
			n = &resNode{all: newStatNode(), share: f.share, origins: newLRU(f.share, newStatNode)}
		} else if !keepsShare(n.share, f.share) || f.originsAfresh {
			// prev goes on with its node until the swap; this snapshot's
			// counts the same calls, per origin afresh.
			n = &resNode{all: n.all, share: f.share, origins: newLRU(f.share, newStatNode)}
		}
		f.nodes[resource] = n
	}
	return n
}

// entNode returns the statistics of resource entered through entrance, as
// resNode does.
func (f *Flow) entNode(entrance, resource string) *statNode {
	k := entKey{entrance, resource}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.ents[k]
	if n == nil {
		if n = f.oldEnts[k]; n == nil {
			n = newStatNode()
		}
		f.ents[k] = n
	}
	return n
}

// Track keeps statistics for resource from now on, so that Stats lists it
// before its first call (an API group no route has reached yet). A Checker
// does this for its own resource. Before Seal, it also keeps the previous
// Flow's statistics of resource.
func (f *Flow) Track(resource string) { f.resNode(resource) }

// Seal ends the carrying over of statistics from the Flow Compile was
// given: the nodes of resources and entrances this Flow has not asked for
// by now are let go. Call it once the snapshot is built (every Checker and
// Track done), before it goes in force; without it they are let go at the
// next Compile instead. A Checker or Track after Seal starts new
// statistics for a resource it had not named.
func (f *Flow) Seal() {
	f.mu.Lock()
	f.oldNodes, f.oldEnts = nil, nil
	f.mu.Unlock()
}

// Rules returns a copy of the rules compiled in.
func (f *Flow) Rules() []config.FlowRule { return slices.Clone(f.rules) }
