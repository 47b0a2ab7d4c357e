package proxy

import (
	"net/http"
	"net/netip"
	"strings"
	"time"

	"sluice/hotparam"
	"sluice/limiter"
	"sluice/limiter/circuit"
	"sluice/limiter/system"
)

// guard is one check that the calls of a route meet. A route holds its
// guards in a fixed array, in the order of docs/rules.md "Combining rules"
// (authority, system, flow, param, degrade), and route.serve runs them in a loop: the
// first block decides, and the guards already passed give back what they
// took.
//
// enter decides a call at now. A call that passes holds the returned token
// until exit (it was forwarded) or cancel (it was not: a later guard blocked
// it, or its client left). The token points into c, where each guard keeps
// what a passed call holds, so that a check allocates nothing.
type guard interface {
	enter(now int64, c *call) (token, limiter.Verdict)
	// refused is told of a call that an earlier guard blocked, so that
	// every guard sees each call once: the flow guard counts it as a block
	// in the resource's statistics.
	refused(now int64, c *call)
	// room widens the retry (ns from now; 0: unknown, left so) of a call
	// that this or an earlier guard refused to this guard's rules: when
	// they would let the call in, counting nothing, if later; -1 when one
	// of them never will (no moment to tell, and -1 stays). A quota that
	// needs longer goes to the call's sink, last, so that RateLimit names
	// it. The first refusing rule alone is no answer: a client that waits
	// Retry-After and retries must pass (SPEC section 4), and a later rule
	// may need longer.
	room(now int64, c *call, retry int64) int64
}

// token is what one guard holds for one passed call; end it once.
type token interface {
	exit(now int64, o outcome)
	// cancel: reason is the guard that stopped the call (ReasonNone: the
	// client went away).
	cancel(now int64, reason limiter.Reason)
}

// outcome is how a forwarded call ended.
type outcome struct {
	rt     time.Duration
	failed bool // upstream 5xx, transport failure or timeout
	// status is the upstream's answer, 0 if none came (transport failure
	// or timeout); each breaker counts it as an error by its errorStatuses.
	status int
	// answer is the upstream's status as handed to the client, even when
	// its body broke after it (status 0): the param rules that count
	// failures judge the upstream's verdict (a login's 401: the guess was
	// tried), where a breaker judges the exchange.
	answer int
	// abandoned: the client left before any answer (or before the one the
	// fast path's uncancellable call still waited for), which says nothing
	// about the upstream's health, so a breaker neither counts it as a
	// success nor spends its probe on it, and the adaptive system check
	// does not count it as capacity.
	abandoned bool
}

const maxGuards = 6 // authority, system, flow, param, degrade, API groups

// guards are one route's guards, in order.
type guards struct {
	list [maxGuards]guard
	n    int
}

func (gs *guards) add(g guard) {
	gs.list[gs.n] = g
	gs.n++
}

// first puts g before the guards there are (the authority guard, which a
// route gets once its API groups are known).
func (gs *guards) first(g guard) {
	copy(gs.list[1:gs.n+1], gs.list[:gs.n])
	gs.list[0] = g
	gs.n++
}

// newGuards builds a route's guards; a resource without param or degrade
// rules has no such guard, and costs nothing for it.
func newGuards(sys *system.Guard, flow *limiter.Checker, params *hotparam.Checker, breakers *circuit.Breakers) guards {
	var gs guards
	gs.add(systemGuard{sys})
	gs.add(flowGuard{flow})
	if params != nil {
		gs.add(newParamGuard(params))
	}
	if breakers != nil {
		gs.add(degradeGuard{breakers})
	}
	return gs
}

// call is one request as the guards see it, and what each guard holds for
// it once passed. It lives in the pooled exchange and is owned by one
// request.
type call struct {
	origin string
	addr   netip.Addr // the client's address, read only for authority rules that name addresses
	n      int64      // acquireCount
	values hotparam.Values
	// occupy is how long a prioritized call may wait for room (ns); 0:
	// the call is not prioritized. Its API groups' calls wait alike: the
	// qps reject rules of the route and of every group it matched hold
	// their passes pending, and the route reserves them at one moment
	// (limiter.Reserve) once every guard passed.
	occupy int64
	parent *call // a group's call: the request's call; nil for that one
	// failures: a param rule of the route or of a group counts failed
	// answers, so the forwarder notes whether the request reached the
	// upstream (prepared.sent) in a way that costs the standard path
	// allocations (the request's call only).
	failures bool
	pending  []*limiter.Token // the flow tokens holding pending passes (the request's call only)

	held  [maxGuards]token // the tokens of the guards passed, in order
	nheld int

	path      string      // the view's path, which API groups match
	groups    []groupCall // the API groups the call matched, in file order (apigroups.go)
	blockedBy *groupEntry // the group whose rule blocked the call; nil: none did

	sys   system.Token
	flow  limiter.Token
	param hotparam.Token
	cb    circuit.Token

	// costHeaders are the response headers whose figures the resource's
	// param rules take after the answer (countOn responseHeader:NAME):
	// read by answer, and not sent to the client unless keepCost (the
	// route's keepCostHeaders).
	costHeaders []string
	// costTrailers are the same names as unannounced trailers
	// (http.TrailerPrefix+name), built once with the guard.
	costTrailers []string
	keepCost     bool

	// quotas collects the quotas that counted the call, for the RateLimit
	// fields; wantQuotas: the route sends them, as rateLimit writes them
	// (with the X-RateLimit-* fields: legacy). clock reads the time an
	// answer's figure lowers a quota at (answer).
	quotas     quotas
	wantQuotas bool
	rateLimit  *rateLimitHeaders
	legacy     bool
	clock      Clock
}

// sink is where the guards report quotas: nil when the route sends no
// RateLimit fields, so that nothing is collected.
func (c *call) sink() limiter.QuotaSink {
	if c.parent != nil {
		// An API group's rules report to the route's call: one response
		// lists the quotas of the route and of its groups (SPEC §4).
		return c.parent.sink()
	}
	if !c.wantQuotas {
		return nil
	}
	return &c.quotas
}

func (c *call) hold(t token) {
	c.held[c.nheld] = t
	c.nheld++
}

// cancel gives back, latest first, what the guards passed took for a call
// that is not forwarded.
func (c *call) cancel(now int64, reason limiter.Reason) {
	for i := c.nheld - 1; i >= 0; i-- {
		c.held[i].cancel(now, reason)
	}
	c.nheld = 0
}

// answered tells the guards that the call was answered at now by a switch
// to a tunnel (101) or by the head of an event stream (SSE: a 2xx
// text/event-stream answer of unknown length, on either forwarder), which then
// lasts as long as it likes: the system guard no longer counts it among
// the calls waiting for an answer and takes its response time as ended
// (system.Token.Answered), though it holds its slots until it ends.
func (c *call) answered(now int64) { c.sys.Answered(now) }

// answer hands the upstream's answer (its final status is being written
// with header h) to the param rules that count after it, and removes the
// headers they read, the API groups' included, before the client sees
// them. A blocked call holds nothing and reads nothing.
func (c *call) answer(h http.Header) {
	c.param.Answer(answerHeader(h))
	for i := range c.groups {
		if gc := &c.groups[i]; gc.entered {
			gc.c.param.Answer(answerHeader(h))
		}
	}
	if c.wantQuotas && c.quotas.n > 0 && c.takesCost() {
		// The RateLimit fields were written as the call entered; a cost
		// the answer tells lowers its rule's quota (hotparam.Token.Spent),
		// and they are written again if it did.
		spent := spentQuotas{qs: &c.quotas}
		now := c.clock.Now()
		c.param.Spent(now, &spent)
		for i := range c.groups {
			if gc := &c.groups[i]; gc.entered {
				gc.c.param.Spent(now, &spent)
			}
		}
		if spent.lowered {
			c.quotas.set(h, c.rateLimit, c.legacy, false)
		}
	}
	c.strip(h)
}

// takesCost reports whether a param rule of the call, or of an API group
// it entered, takes a cost from the answer (countOn responseHeader).
func (c *call) takesCost() bool {
	if len(c.costHeaders) > 0 {
		return true
	}
	for i := range c.groups {
		if gc := &c.groups[i]; gc.entered && len(gc.c.costHeaders) > 0 {
			return true
		}
	}
	return false
}

// strip removes from h the headers whose figures the call's param rules
// (the API groups' included) take, so that no answer, interim (1xx) or
// final, nor its trailers (announced, or with http.TrailerPrefix, which
// the forwarders add after the body), shows them to the client, unless
// its route keeps them.
func (c *call) strip(h http.Header) {
	if c.keepCost {
		return
	}
	for _, name := range c.costHeaders {
		delete(h, name)
	}
	for _, name := range c.costTrailers {
		delete(h, name)
	}
	if len(c.costHeaders) > 0 {
		// The announcement too: the client need not learn the figure's name.
		if tr := h["Trailer"]; len(tr) > 0 {
			if tr = unannounce(tr, c.costHeaders); len(tr) == 0 {
				delete(h, "Trailer")
			} else {
				h["Trailer"] = tr
			}
		}
	}
	for i := range c.groups {
		if gc := &c.groups[i]; gc.entered {
			gc.c.strip(h)
		}
	}
}

// unannounce is a Trailer field's lines without the names in drop; the
// lines themselves (not copied) when none is there.
func unannounce(lines, drop []string) []string {
	named := func(name string) bool {
		for _, d := range drop {
			if strings.EqualFold(name, d) {
				return true
			}
		}
		return false
	}
	found := false
	for name := range listTokens(lines) {
		found = found || named(name)
	}
	if !found {
		return lines
	}
	var kept []string
	for name := range listTokens(lines) {
		if !named(name) {
			kept = append(kept, name)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return []string{strings.Join(kept, ", ")}
}

// answerHeader is a response header as hotparam reads it; a map, so
// converting it to the interface allocates nothing.
type answerHeader http.Header

// Header is the field name of the answer's head. A gRPC answer whose head
// holds grpc-status is trailers-only (a call that failed before any
// message, in one HEADERS frame): its metadata are trailing metadata,
// which are not read (docs/rules.md), as they are not when the same
// server sends them after a head of their own; so both spellings of one
// answer cost the same.
func (h answerHeader) Header(name string) []string {
	// A plain HTTP answer that carries grpc-status (a transcoder's error)
	// is read as any other.
	if _, trailersOnly := h["Grpc-Status"]; trailersOnly && grpcContent(http.Header(h)) {
		return nil
	}
	return h[name]
}

// exit settles a forwarded call with every guard it passed, latest first.
func (c *call) exit(now int64, o outcome) {
	for i := c.nheld - 1; i >= 0; i-- {
		c.held[i].exit(now, o)
	}
	c.nheld = 0
}

// The four stateful guards adapt their packages, which know nothing of proxy, to the
// one shape. Each is one pointer, so held in an interface it allocates
// nothing; each token type is its package's Token, so &c.<field> converts
// to it in place.
var (
	_ guard = systemGuard{}
	_ guard = flowGuard{}
	_ guard = paramGuard{}
	_ guard = degradeGuard{}
)

type systemGuard struct{ g *system.Guard }

func (s systemGuard) enter(now int64, c *call) (token, limiter.Verdict) {
	var v limiter.Verdict
	c.sys, v = s.g.Enter(now)
	return (*systemToken)(&c.sys), v
}

func (systemGuard) refused(int64, *call) {}

// room: the system guard comes before every rule with a retry; maxQps
// tells its own when it refuses.
func (systemGuard) room(_ int64, _ *call, retry int64) int64 { return retry }

type systemToken system.Token

func (t *systemToken) exit(now int64, o outcome) {
	(*system.Token)(t).Exit(now, o.failed || o.abandoned)
}

func (t *systemToken) cancel(now int64, _ limiter.Reason) { (*system.Token)(t).Cancel(now) }

type flowGuard struct{ c *limiter.Checker }

func (f flowGuard) enter(now int64, c *call) (token, limiter.Verdict) {
	var v limiter.Verdict
	if c.occupy <= 0 {
		v = f.c.EnterQuotas(&c.flow, now, c.origin, c.n, -1, c.sink())
		return (*flowToken)(&c.flow), v
	}
	v = f.c.EnterPending(&c.flow, now, c.origin, c.n, c.sink())
	if !v.Blocked {
		// Decided now, not in reservePending, so that the would-be blocks
		// are reported with this verdict: the route's, or its group's.
		v.DryRun += c.flow.DecideDryRun(now, c.occupy)
		root := c
		if c.parent != nil {
			root = c.parent
		}
		root.pending = append(root.pending, &c.flow)
	}
	return (*flowToken)(&c.flow), v
}

// reservePending reserves at one moment the passes the call's flow tokens
// (its route's and its groups') hold pending, for a prioritized call, and
// reports the verdict: a wait, or a flow block when no moment within
// occupy has room in every window.
func (c *call) reservePending(now int64) limiter.Verdict {
	var v limiter.Verdict
	if len(c.pending) == 0 {
		return v
	}
	if ok, retry := limiter.Reserve(now, c.occupy, c.pending, &v); !ok {
		// The answer names the group whose window had no room, as a
		// group's block does when it is not prioritized.
		if i := limiter.Blocking(now, c.occupy, c.pending); i >= 0 {
			for j := range c.groups {
				if gc := &c.groups[j]; &gc.c.flow == c.pending[i] {
					c.blockedBy = gc.e
				}
			}
		}
		return limiter.Verdict{Blocked: true, Reason: limiter.ReasonFlow, RetryAfter: time.Duration(retry),
			Quota: v.Quota, HasQuota: v.HasQuota}
	}
	return v
}

func (f flowGuard) refused(now int64, c *call) { f.c.Block(now, c.origin, c.n) }

func (f flowGuard) room(now int64, c *call, retry int64) int64 {
	return f.c.Room(now, c.origin, c.n, retry, c.sink())
}

type flowToken limiter.Token

func (t *flowToken) exit(now int64, o outcome) { (*limiter.Token)(t).Exit(now, o.failed) }

func (t *flowToken) cancel(now int64, reason limiter.Reason) {
	(*limiter.Token)(t).Cancel(now, reason)
}

type paramGuard struct {
	c        *hotparam.Checker
	trailers []string // c.Headers() as unannounced trailers' keys
}

func newParamGuard(c *hotparam.Checker) paramGuard {
	p := paramGuard{c: c}
	for _, name := range c.Headers() {
		p.trailers = append(p.trailers, http.TrailerPrefix+name)
	}
	return p
}

func (p paramGuard) enter(now int64, c *call) (token, limiter.Verdict) {
	v := p.c.EnterQuotas(&c.param, now, c.values, c.n, c.sink())
	c.costHeaders, c.costTrailers = p.c.Headers(), p.trailers
	if p.c.CountsFailures() {
		c.request().failures = true
	}
	return (*paramToken)(&c.param), v
}

func (paramGuard) refused(int64, *call) {}

func (p paramGuard) room(now int64, c *call, retry int64) int64 {
	return p.c.Room(now, c.values, c.n, retry, c.sink())
}

type paramToken hotparam.Token

func (t *paramToken) exit(now int64, o outcome) { (*hotparam.Token)(t).Exit(now, o.answer) }

func (t *paramToken) cancel(now int64, _ limiter.Reason) { (*hotparam.Token)(t).Cancel(now) }

type degradeGuard struct{ b *circuit.Breakers }

func (d degradeGuard) enter(now int64, c *call) (token, limiter.Verdict) {
	var v limiter.Verdict
	c.cb, v = d.b.Enter(now)
	return (*degradeToken)(&c.cb), v
}

func (degradeGuard) refused(int64, *call) {}

func (d degradeGuard) room(now int64, _ *call, retry int64) int64 { return d.b.Room(now, retry) }

type degradeToken circuit.Token

func (t *degradeToken) exit(now int64, o outcome) {
	if o.abandoned {
		(*circuit.Token)(t).Abandon(now, o.rt)
	} else {
		(*circuit.Token)(t).Exit(now, o.rt, o.status)
	}
}

func (t *degradeToken) cancel(now int64, _ limiter.Reason) { (*circuit.Token)(t).Cancel(now) }

// request is the request's call: c, or the call c is a group's call of.
func (c *call) request() *call {
	if c.parent != nil {
		return c.parent
	}
	return c
}
