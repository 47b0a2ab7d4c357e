package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice/config"
	"sluice/internal/redisconn"
	"sluice/limiter/window"
)

// Errors returned by Acquire when it has no decision; the caller then applies
// the rule locally or lets the call pass (clusterConfig.fallbackToLocalWhenFail).
var (
	// ErrUnavailable: the breaker is open because Redis recently failed.
	ErrUnavailable = errors.New("cluster: redis unavailable")
	// ErrTimeout: no answer within Options.Timeout.
	ErrTimeout = errors.New("cluster: redis timeout")
	// ErrClosed: the Service was closed.
	ErrClosed = errors.New("cluster: service closed")
	// ErrUnsupported: the rule cannot be counted in the cluster (grade
	// concurrency: the interface has no release, so in-flight counts stay local).
	ErrUnsupported = errors.New("cluster: only qps rules can be counted in the cluster")
)

const (
	// failThreshold consecutive failed round trips open the breaker.
	failThreshold = 3
	// Probe backoff while Redis is down: doubles from minProbe up to maxProbe,
	// so a returning Redis is noticed within about a second.
	minProbe = 50 * time.Millisecond
	maxProbe = time.Second
	// stableUp is how long Redis must stay up before the backoff restarts.
	stableUp = 10 * time.Second
	// maxBatch caps calls per script run so one run stays short on Redis.
	maxBatch = 128
	// workers is how many batches can be in flight at once; more overlap
	// round trips, fewer make bigger batches.
	workers = 2
)

// Service is a cluster token service on Redis. It is safe for concurrent use.
// Build it with New, run Run in a goroutine for heartbeats and recovery
// probing, and Close it when done. The zero value is not usable.
type Service struct {
	opts    Options
	rdb     *redisconn.Client
	scripts scripts
	specs   specCache
	gwKey   string       // namespace's gateway set
	liftKey string       // namespace's lift counter, in gwKey's slot (the beat reads both)
	lifts   atomic.Int64 // the lift counter as last read (noLifts before)
	expiry  string       // gateway expiry in ms, as a script argument
	sharded bool         // a Redis Cluster: a script's keys must share a slot

	// gateways is the newest reading of the live gateways, for avgLocal
	// windows (nil before the first); avgAt is when an avgLocal rule was
	// last asked for (on the epoch's timeline), so that readings are
	// refreshed while in use.
	gateways atomic.Pointer[reading]
	avgAt    atomic.Int64
	// backAt is when Redis answered again after failing (on the epoch's
	// timeline; 0: never): the gateways then re-announce themselves on a
	// master that may have lost their heartbeats (a promoted replica), and
	// a count read meanwhile is kept from falling (noteGateways).
	backAt atomic.Int64

	calls        chan *call
	active       atomic.Int64         // Acquire calls in progress
	blocks       blockCache           // windows known to be full, answered without Redis
	quotaReturns quotaReturns         // calendar quota give-backs Redis did not take
	backIDs      atomic.Uint64        // the last give-back id drawn (nextBackID); random at New
	leases       leaseCache           // tokens counted in Redis for this gateway, used locally
	noLease      bool                 // tests only: set before use
	clock        func() time.Duration // tests only, set before use: the instant in Redis µs (as a Duration) to decide at instead of TIME
	now          func() time.Time     // tests only, set before use: the wall clock calendar quotas read instead of time.Now
	epoch        time.Time            // origin of blockCache's monotonic instants
	// skew is Redis's clock minus this machine's (ms), as the last
	// heartbeat measured it: a period's reset, on this gateway's clock, is
	// sent to Redis as an expiry on Redis's (redisAhead).
	skew atomic.Int64
	quit chan struct{}
	wg   sync.WaitGroup
	pool sync.Pool // *call; a call whose caller timed out is never returned

	up     atomic.Bool
	known  atomic.Bool  // a state has been reported; until then up is an assumption
	mu     sync.Mutex   // serialises state changes so OnState sees each once
	fails  atomic.Int32 // consecutive failed round trips
	closed atomic.Bool
	left   atomic.Bool // out of the gateway set for good (leave); guarded by beatMu for writes
	once   sync.Once
	beatMu sync.Mutex // orders heartbeats before the goodbye (leave)

	statusMu sync.Mutex         // orders OnStatus calls; guards status and masters
	status   Status             // as last reported
	masters  []redisconn.Master // as the last heartbeat found them
}

// New builds a Service. It does not contact Redis, so a gateway starts while
// Redis is down; the Service starts in the up state and finds out on first use.
func New(opts Options) (*Service, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// Fail fast: the breaker and Run's probes do the retrying, and a request
	// must not wait for go-redis's own retries and dial backoff.
	// Socket deadlines rather than a context deadline per batch bound each
	// round trip: they cost no allocation. A call that has to dial a fresh
	// connection may take up to DialTimeout instead.
	rdb, err := redisconn.New(opts.Redis, redisconn.Options{Timeout: opts.Timeout})
	if err != nil {
		return nil, errors.New("cluster: " + err.Error())
	}
	s := &Service{
		opts:    opts,
		rdb:     rdb,
		scripts: newScripts(),
		specs:   specCache{ns: opts.Namespace},
		gwKey:   "{" + opts.Namespace + "}:gw",
		liftKey: "{" + opts.Namespace + "}:lifts",
		sharded: rdb.Form() == config.RedisFormCluster,
		expiry:  itoa(3 * opts.Heartbeat.Milliseconds()),
		calls:   make(chan *call, 4096),
		epoch:   time.Now(),
		quit:    make(chan struct{}),
	}
	s.status = Status{Form: rdb.Form(), Redis: rdb.String(), Up: true, Masters: []Master{}}
	s.pool.New = func() any { return &call{done: make(chan error, 1)} }
	var seed [8]byte
	_, _ = rand.Read(seed[:]) // never fails (crypto/rand)
	s.backIDs.Store(binary.LittleEndian.Uint64(seed[:]))
	s.up.Store(true)
	s.lifts.Store(noLifts)
	s.wg.Add(workers)
	for range workers {
		go s.batcher()
	}
	return s, nil
}

// Up reports whether Redis is believed reachable (the breaker is closed).
func (s *Service) Up() bool { return s.up.Load() }

// GatewayID is this process's id in the namespace's gateway set.
func (s *Service) GatewayID() string { return s.opts.GatewayID }

// Acquire takes n tokens of rule for key ("" for a resource-wide rule, else
// the origin) from the cluster. ok=false means the cluster blocks the call.
// err != nil means no decision (Redis down, slow, or the rule unsupported);
// then ok is false and the caller decides. It returns within Options.Timeout,
// plus up to max(Timeout, 50ms) when it has to dial a new connection itself.
func (s *Service) Acquire(rule *config.FlowRule, key string, n int64) (ok bool, err error) {
	ok, _, err = s.AcquireRetry(rule, key, n)
	return ok, err
}

// AcquireRetry is Acquire that also says, when the cluster blocks the
// call, how long until the window can take its n tokens (0: unknown), for
// Retry-After.
func (s *Service) AcquireRetry(rule *config.FlowRule, key string, n int64) (ok bool, retry time.Duration, err error) {
	ok, retry, _, _, err = s.AcquireFlow(rule, key, n, false)
	return ok, retry, err
}

// AcquireFlow is AcquireRetry that, with report, also says of a pass what
// the window has left after it (left, -1 when not known: report false, or
// a pass from a lease granted without it) and how long until the window's
// oldest pass leaves it (reset), for the RateLimit fields. Reporting costs
// the script a binary search of the window; a pass from a lease reports
// what the window had left when the lease was granted plus the lease's
// unused tokens, which other gateways' passes since may have taken.
func (s *Service) AcquireFlow(rule *config.FlowRule, key string, n int64, report bool) (ok bool, retry time.Duration, left int64, reset time.Duration, err error) {
	ok, retry, left, reset, _, err = s.AcquireFlowStamp(rule, key, n, report)
	return ok, retry, left, reset, err
}

// AcquireFlowStamp is AcquireFlow that also says of a pass the stamp of
// its n tokens in the window (0: none to give back), for GiveBackFlow.
func (s *Service) AcquireFlowStamp(rule *config.FlowRule, key string, n int64, report bool) (ok bool, retry time.Duration, left int64, reset time.Duration, stamp int64, err error) {
	switch {
	case s.closed.Load():
		return false, 0, -1, 0, 0, ErrClosed
	case rule.Grade == config.GradeConcurrency:
		return false, 0, -1, 0, 0, ErrUnsupported
	case n <= 0:
		return true, 0, -1, 0, 0, nil
	case !s.up.Load():
		return false, 0, -1, 0, 0, s.unanswered(acquireOp(report), ErrUnavailable)
	}
	return s.acquire(s.specs.get(rule), key, n, nil, 0, acquireOp(report), 0)
}

// GiveBackFlow gives back the n tokens of a pass of rule for key that
// AcquireFlowStamp stamped stamp, because a later check blocked the call:
// they are returned with the next call to Redis on the window (from any
// gateway's point of view, as soon as that call is decided), and a note
// that the window is full is dropped. It never waits for Redis. Tokens
// this gateway cannot keep track of (more windows with pending returns
// than its lease cache holds, or none asked about them for a second while
// it is full) stay counted until they leave the window: that only ever
// passes less. stamp 0 gives back nothing.
func (s *Service) GiveBackFlow(rule *config.FlowRule, key string, n, stamp int64) {
	if stamp <= 0 || n <= 0 || s.closed.Load() || rule.Grade == config.GradeConcurrency {
		return
	}
	s.giveBack(s.specs.get(rule), key, n, stamp)
}

// giveBack notes n tokens of spec's window for key, stamped stamp, to
// return with its next call to Redis.
func (s *Service) giveBack(spec *ruleSpec, key string, n, stamp int64) {
	s.leases.giveBack(spec, key, n, stamp, s.timeline(time.Since(s.epoch)))
	s.blocks.forget(spec, key, false)
}

// timeline is real, an instant on the Service's monotonic timeline, or
// the test's clock's instant when it has one.
func (s *Service) timeline(real time.Duration) time.Duration {
	if s.clock != nil {
		return s.clock()
	}
	return real
}

// acquireOp is the op that takes tokens, saying what they leave or not.
func acquireOp(report bool) int64 {
	if report {
		return opAcquireLeft
	}
	return opAcquire
}

// AcquireParam takes n tokens of a clusterMode param rule for one value
// from the cluster: the value's own window of count (the rule's, or the
// item's that the value matches) per durationSec, an exact sliding window
// like a flow rule's, expiring a second after it empties. ok and err are as
// AcquireRetry's: a block says how long until the window can take the
// call. Only grade qps with controlBehavior reject can be counted;
// other rules get ErrUnsupported. value may alias a buffer the caller
// reuses after the call: what is kept of it is copied. rule must not
// change once used (its address names its prepared form).
func (s *Service) AcquireParam(rule *config.ParamRule, count float64, value string, n int64) (ok bool, retry time.Duration, err error) {
	ok, retry, _, _, _, err = s.paramOp(rule, count, value, n, opAcquire)
	return ok, retry, err
}

// AcquireParamLeft is AcquireParam that, with report, also says of a pass
// what value's window has left after it and how long until its oldest pass
// leaves it, as AcquireFlow does.
func (s *Service) AcquireParamLeft(rule *config.ParamRule, count float64, value string, n int64, report bool) (ok bool, retry time.Duration, left int64, reset time.Duration, err error) {
	ok, retry, left, reset, _, err = s.paramOp(rule, count, value, n, acquireOp(report))
	return ok, retry, left, reset, err
}

// AcquireParamStamp is AcquireParamLeft that also says of a pass the
// stamp of its n tokens in value's window (0: none to give back), for
// GiveBackParam.
func (s *Service) AcquireParamStamp(rule *config.ParamRule, count float64, value string, n int64, report bool) (ok bool, retry time.Duration, left int64, reset time.Duration, stamp int64, err error) {
	return s.paramOp(rule, count, value, n, acquireOp(report))
}

// GiveBackParam gives back the n tokens of a pass of value's window of a
// clusterMode param rule (count as AcquireParamStamp was asked) that
// AcquireParamStamp stamped stamp, because a later check blocked the
// call, as GiveBackFlow does. A calendar quota's pass has no stamp: it is
// not given back. value may alias a buffer the caller reuses.
func (s *Service) GiveBackParam(rule *config.ParamRule, count float64, value string, n, stamp int64) {
	if stamp <= 0 || n <= 0 || s.closed.Load() {
		return
	}
	if spec := s.specs.param(rule, count); !spec.quota {
		s.giveBack(spec, value, n, stamp)
	}
}

// PeekParam reports whether value's window of a clusterMode param rule
// could take n tokens now, taking none: a countOn failure or
// responseHeader rule lets a call in on it, and charges the answer's
// tokens with ChargeParam. ok and err are as AcquireParam's.
func (s *Service) PeekParam(rule *config.ParamRule, count float64, value string, n int64) (ok bool, retry time.Duration, err error) {
	ok, retry, _, _, err = s.PeekParamLeft(rule, count, value, n, false)
	return ok, retry, err
}

// PeekParamLeft is PeekParam that, with report, also says of a call that
// would fit what value's window has left and how long until its oldest
// pass leaves it (0: none in it), as AcquireParamLeft does.
func (s *Service) PeekParamLeft(rule *config.ParamRule, count float64, value string, n int64, report bool) (ok bool, retry time.Duration, left int64, reset time.Duration, err error) {
	op := opPeek
	if report {
		op = opPeekLeft
	}
	ok, retry, left, reset, _, err = s.paramOp(rule, count, value, n, op)
	return ok, retry, left, reset, err
}

// ChargeParam takes n tokens of value's window after a call's answer,
// whether or not they fit. The window holds count tokens at most: tokens
// past what it has room for take the places of its oldest passes (stamped
// now, they count for another durationSec), so an overdraw keeps the value
// out until its passes leave the window, at most durationSec, and one
// charge takes at most count tokens. err != nil: Redis did not take them.
func (s *Service) ChargeParam(rule *config.ParamRule, count float64, value string, n int64) error {
	_, _, _, _, _, err := s.paramOp(rule, count, value, n, opCharge)
	return err
}

// paramOp runs op on value's window of a clusterMode param rule, after the
// checks every such call shares.
func (s *Service) paramOp(rule *config.ParamRule, count float64, value string, n int64, op int64) (ok bool, retry time.Duration, left int64, reset time.Duration, stamp int64, err error) {
	switch {
	case s.closed.Load():
		return false, 0, -1, 0, 0, ErrClosed
	case rule.Grade == config.GradeConcurrency || rule.ControlBehavior == config.BehaviorThrottle:
		return false, 0, -1, 0, 0, ErrUnsupported
	case n <= 0:
		return true, 0, -1, 0, 0, nil
	case !s.up.Load():
		return false, 0, -1, 0, 0, s.unanswered(op, ErrUnavailable)
	}
	return s.acquire(s.specs.param(rule, count), value, n, nil, 0, op, 0)
}

// AcquireQuota takes n of one value's calendar quota, for a clusterMode
// param rule with window day or month: count (the rule's, or the item's
// that the value matches) calls per calendar day or month in the rule's
// timezone, kept in Redis as a counter of the period's calls that expires
// a little after the reset. ok and err are as Acquire's; left is what the
// period has left after this call (0 when blocked), reset the time until
// the period ends (the gateway's clock says when: a fleet's clocks are
// assumed to agree within a second or so) and period its length (24 h, or
// 23 or 25 on a day daylight saving time starts or ends). value may alias a
// buffer the caller reuses after the call. rule must not change once used.
func (s *Service) AcquireQuota(rule *config.ParamRule, count float64, value string, n int64) (ok bool, left int64, reset, period time.Duration, err error) {
	ok, left, reset, period, _, err = s.quotaOp(rule, count, value, n, opAcquire)
	return ok, left, reset, period, err
}

// AcquireQuotaStamp is AcquireQuota that also says of a pass the stamp
// GiveBackQuota takes n back with: the start of the period it counted in
// (Unix ms; 0 with no pass).
func (s *Service) AcquireQuotaStamp(rule *config.ParamRule, count float64, value string, n int64) (ok bool, left int64, reset, period time.Duration, stamp int64, err error) {
	return s.quotaOp(rule, count, value, n, opAcquire)
}

// GiveBackQuota takes the n calls of a pass back off value's period stamped
// stamp (AcquireQuotaStamp), at once: a countOn failure call holds its
// place in the period while in flight, and one that was no failure must
// free it before the next guess, on any gateway, is let in or refused. A
// period that has ended is left alone. A refusal noted for the value is
// dropped: the period may have room again. value may alias a buffer the
// caller reuses.
// Redis takes a give-back once, by an id of its own (nextBackID). One it
// did not take, made while the breaker is open (nothing is sent) or whose
// round trip failed (a timeout, a lost connection), is kept and sent
// again, with its id, once Redis answers (quotaReturns): if the first did
// reach Redis (a timeout), the second finds it taken and takes nothing.
func (s *Service) GiveBackQuota(rule *config.ParamRule, count float64, value string, n, stamp int64) {
	spec := s.specs.param(rule, count)
	if !spec.quota || stamp == 0 || n <= 0 || s.closed.Load() {
		return
	}
	r := quotaReturn{spec: spec, value: value, n: n, stamp: stamp, id: s.nextBackID()}
	if err := s.giveBackQuota(&r); err != nil {
		s.quotaReturns.add(r)
	}
}

// giveBackQuota sends give-back r to Redis, unless its period has ended
// or it was first sent more than quotaResendWithin ago, and notes when it
// is first sent. err != nil: Redis may not have taken it, and r may be
// sent again: ErrUnavailable without a round trip while the breaker is
// open, or the round trip's error. A closed Service sends nothing and
// says nothing.
func (s *Service) giveBackQuota(r *quotaReturn) error {
	start := time.UnixMilli(r.stamp)
	p, now := r.spec.periodAt(start), s.wall()
	switch {
	case !p.start.Equal(start) || !now.Before(p.reset) || s.closed.Load():
		return nil
	case !r.sent.IsZero() && now.Sub(r.sent) > quotaResendWithin:
		return nil // its mark may be gone: sent again, it could be taken twice
	case !s.up.Load():
		return ErrUnavailable
	}
	if r.sent.IsZero() {
		r.sent = now
	}
	_, _, _, _, _, err := s.acquire(r.spec, r.value, r.n, p, p.reset.Sub(now), opGiveBack, r.id)
	s.blocks.forget(r.spec, r.value, false)
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// nextBackID is a new calendar quota give-back's id, never 0. The ids
// count up from a random number drawn at New, so no two Services, in the
// fleet or one after another under the same GatewayID, are near enough
// to meet within a period.
func (s *Service) nextBackID() uint64 {
	for {
		if id := s.backIDs.Add(1); id != 0 {
			return id
		}
	}
}

// CheckQuota reports whether n more calls would fit value's calendar
// quota now, taking none, with AcquireQuota's figures (left: what the
// period has left): a countOn failure or responseHeader rule lets a call
// in on it and charges the answer's cost with ChargeQuota.
func (s *Service) CheckQuota(rule *config.ParamRule, count float64, value string, n int64) (ok bool, left int64, reset, period time.Duration, err error) {
	ok, left, reset, period, _, err = s.quotaOp(rule, count, value, n, opPeek)
	return ok, left, reset, period, err
}

// ChargeQuota adds n to value's calendar quota after a call's answer,
// whether or not it fits: an overdrawn period refuses the value until its
// reset, and the next period starts whole. err != nil: Redis did not
// take it.
func (s *Service) ChargeQuota(rule *config.ParamRule, count float64, value string, n int64) error {
	_, _, _, _, _, err := s.quotaOp(rule, count, value, n, opCharge)
	return err
}

// ChargeQuotaStamp is ChargeQuota for a call that held a pass stamped
// stamp (AcquireQuotaStamp): the charge goes to the period the call was
// let in on, and to none once that period has ended. Charged by the clock
// at the answer, a call let in a second before midnight and answered after
// it spent the next day's quota.
func (s *Service) ChargeQuotaStamp(rule *config.ParamRule, count float64, value string, n, stamp int64) error {
	spec := s.specs.param(rule, count)
	if !spec.quota || stamp == 0 {
		return s.ChargeQuota(rule, count, value, n)
	}
	start := time.UnixMilli(stamp)
	p, now := spec.periodAt(start), s.wall()
	switch {
	case s.closed.Load():
		return ErrClosed
	case n <= 0 || !p.start.Equal(start) || !now.Before(p.reset):
		return nil // the call's period is over: its charge went with it
	case !s.up.Load():
		return s.unanswered(opCharge, ErrUnavailable)
	}
	_, _, _, _, _, err := s.acquire(spec, value, n, p, p.reset.Sub(now), opCharge, 0)
	return err
}

// quotaOp runs op on value's calendar quota, after the checks every such
// call shares; stamp is the start of the period of an opAcquire's pass
// (Unix ms).
func (s *Service) quotaOp(rule *config.ParamRule, count float64, value string, n int64, op int64) (ok bool, left int64, reset, period time.Duration, stamp int64, err error) {
	spec := s.specs.param(rule, count)
	if !spec.quota {
		return false, 0, 0, 0, 0, ErrUnsupported // no calendar: no period to say
	}
	now := s.wall()
	p := spec.periodAt(now)
	reset, period = p.reset.Sub(now), p.reset.Sub(p.start)
	switch {
	case s.closed.Load():
		return false, 0, reset, period, 0, ErrClosed
	case n <= 0:
		return true, 0, reset, period, 0, nil
	case !s.up.Load():
		return false, 0, reset, period, 0, s.unanswered(op, ErrUnavailable)
	}
	ok, _, left, _, _, err = s.acquire(spec, value, n, p, reset, op, 0)
	left = max(left, 0) // a block the gateway remembers, or no answer: none said
	if ok && err == nil && op == opAcquire {
		stamp = p.start.UnixMilli()
	}
	return ok, left, reset, period, stamp, err
}

// ForgetParam empties value's window of a clusterMode param rule (count:
// the rule's, or the item's the value matches, as AcquireParam is asked)
// in Redis, for every gateway of the namespace, and forgets this gateway's
// note that the window was full: an operator lifting a lockout. It counts
// the lift in the namespace's lift counter, which every gateway reads with
// its heartbeat: one that noted the window full then forgets what it noted,
// so it refuses the value locally for at most a heartbeat more. It waits
// for Redis as long as ctx allows, breaker or not: an operator asked.
func (s *Service) ForgetParam(ctx context.Context, rule *config.ParamRule, count float64, value string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	spec := s.specs.param(rule, count)
	suffix := ""
	if spec.quota {
		suffix = spec.periodAt(s.wall()).label // a calendar quota: its count of this period
	}
	if err := s.rdb.Del(ctx, valueKey(spec, value, suffix)).Err(); err != nil {
		return err
	}
	// After the DEL: a call started since is decided on the emptied window,
	// and one in flight across it is not remembered (the generation moved).
	s.blocks.forget(spec, value, true)
	// The other gateways read the counter with their heartbeat and forget
	// the windows they noted full.
	return s.rdb.Incr(ctx, s.liftKey).Err()
}

// PeekQuota reads what value's calendar quota (count: the rule's, or the
// item's the value matches, as AcquireQuota is asked) has left in the
// current period, taking nothing, and the time until the period's reset:
// for operators (GET /api/params). It waits for Redis as long as ctx
// allows, and at most Options.Timeout on the socket.
func (s *Service) PeekQuota(ctx context.Context, rule *config.ParamRule, count float64, value string) (left int64, reset time.Duration, err error) {
	if s.closed.Load() {
		return 0, 0, ErrClosed
	}
	spec := s.specs.param(rule, count)
	if !spec.quota {
		return 0, 0, ErrUnsupported
	}
	now := s.wall()
	p := spec.periodAt(now)
	used, err := s.rdb.Get(ctx, valueKey(spec, value, p.label)).Int64()
	if errors.Is(err, redis.Nil) {
		used, err = 0, nil // no call yet this period
	}
	if err != nil {
		return 0, 0, err
	}
	return max(int64(math.Floor(count+1e-9))-used, 0), p.reset.Sub(now), nil
}

// ReadParam reads value's window of a clusterMode param rule (count as
// AcquireParam is asked) without taking a token, for an operator: the
// tokens it holds now and how long until the oldest of them leaves (0
// when it holds none), as this gateway's next call finds them: less the
// tokens it leased and has not used, and those it gave back (GiveBackParam)
// and has not returned to Redis yet. A calendar quota has no window: ErrUnsupported
// (PeekQuota reads it). It waits for Redis as long as ctx allows, breaker
// or not.
func (s *Service) ReadParam(ctx context.Context, rule *config.ParamRule, count float64, value string) (used float64, wait time.Duration, err error) {
	if s.closed.Load() {
		return 0, 0, ErrClosed
	}
	spec := s.specs.param(rule, count)
	if spec.quota {
		return 0, 0, ErrUnsupported
	}
	limit := count
	if spec.avg {
		limit *= float64(s.Gateways())
	}
	// Under one call an interval, the window spans the fewest whole
	// intervals that hold one, as the window script reads it.
	ns, _ := window.ClusterWholeCalls(limit, rule.DurationSec*int64(time.Second))
	intervalMs := ns / int64(time.Millisecond)
	res, err := s.scripts.read.Run(ctx, s.rdb, []string{valueKey(spec, value, "")}, strconv.FormatInt(intervalMs, 10)).Int64Slice()
	if err != nil {
		return 0, 0, err
	}
	if len(res) != 2 {
		return 0, 0, errors.New("cluster: reading a param window: unexpected answer")
	}
	// The passes a later check refused are given back with this gateway's
	// next call on the window: until then Redis still counts them, and the
	// value would read as locked out while its next call passes.
	used = float64(res[0] - s.leases.held(spec, value, s.timeline(time.Since(s.epoch))))
	if used <= 0 {
		return 0, 0, nil
	}
	return used, time.Duration(res[1]) * time.Microsecond, nil
}

// wall is the wall clock calendar quotas read.
func (s *Service) wall() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// redisAhead is how far Redis's clock is ahead of the one calendar quotas
// read (ms; behind if negative): a test's wall clock is read against this
// machine's, which the heartbeat measures against Redis's.
func (s *Service) redisAhead() int64 {
	if s.now != nil {
		return s.skew.Load() + time.Since(s.now()).Milliseconds()
	}
	return s.skew.Load()
}

// Gateways is the number of live gateways in the namespace as last read
// (by the heartbeat; kept while Redis is down), at least 1: a global rule
// falling back to local limiting limits each gateway at count / Gateways.
// A gateway that has never reached Redis reads 1.
func (s *Service) Gateways() int {
	if r := s.gateways.Load(); r != nil && r.n > 1 {
		return int(r.n)
	}
	return 1
}

// ResumeSkew is how much later than another gateway this one may notice
// Redis answer again: its probe backs off to maxProbe, and a probe waits
// up to Timeout. A gateway that resumed keeps its clusterMode flow rules
// to its share that long past a window (limiter.ResumeSkewer), while the
// others may still be passing their shares alone.
func (s *Service) ResumeSkew() time.Duration { return maxProbe + s.opts.Timeout }

// acquire takes n tokens of spec's window for key (an origin, a value),
// or for a calendar quota n of the value's count in period p, which ends
// in reset (left: the calls the period has left after this one). op is
// what is asked of a window: to take n tokens (opAcquire, or
// opAcquireLeft: and say what a pass leaves, in left and leaves), whether
// they would fit (opPeek), or to take them anyway (opCharge). Only the
// acquiring ops use leases; a charge passes the blocks cache, which only
// knows what fits. left is -1 when not known. stamp is, for an acquiring
// op's pass of a window, the stamp of its n tokens there (giveBack). back
// is a quota's opGiveBack's id (nextBackID), else 0.
func (s *Service) acquire(spec *ruleSpec, key string, n int64, p *period, reset time.Duration, op int64, back uint64) (ok bool, retry time.Duration, left int64, leaves time.Duration, stamp int64, err error) {
	start := time.Now()
	at := start.Sub(s.epoch)
	if spec.avg {
		// Rarely written: the heartbeat only needs to know it is recent.
		if int64(at)-s.avgAt.Load() > int64(100*time.Millisecond) {
			s.avgAt.Store(int64(at))
		}
	}
	at = s.timeline(at)
	if p != nil && s.now != nil {
		at = s.now().Sub(s.epoch) // a quota's block lasts until the reset on the test's clock
	}
	var demand int64
	lease := !s.noLease && spec.lease && (op == opAcquire || op == opAcquireLeft)
	if lease {
		var leased bool
		if leased, demand, left, leaves, stamp = s.leases.take(spec, key, n, at, at+s.opts.Timeout); leased {
			if op != opAcquireLeft {
				left, leaves = -1, 0
			}
			return true, 0, left, leaves, stamp, nil
		}
	}
	// A lease request always asks what the window has left, so that the
	// lease's passes can tell it to callers that ask (leases are shared by
	// every caller of the window).
	quiet := demand > 0 && op == opAcquire
	if quiet {
		op = opAcquireLeft
	}
	if blocked, until := s.blocks.blocked(spec, key, n, at); op != opCharge && op != opGiveBack && blocked {
		if demand > 0 {
			s.leases.grant(spec, key, 0, 0, at, at, -1, 0) // asked for nothing after all
		}
		return false, until - at, -1, 0, 0, nil
	}
	c := s.pool.Get().(*call)
	if p == nil {
		// Unused leased tokens and given-back passes. Sent once: should
		// this call get no answer, the tokens stay counted, which only
		// ever passes less.
		c.void, c.voidAt = s.leases.popVoid(spec, key)
	}
	c.slot = spec.slot
	if p != nil {
		c.expireAt, c.reset = p.expireAt(s.redisAhead()), reset
	}
	if spec.perValue {
		suffix := ""
		if p != nil {
			suffix = p.label
		}
		c.key = valueKey(spec, key, suffix)
		if s.sharded {
			c.slot = redisconn.Slot(c.key)
		}
	} else {
		c.key = originKey(spec, key)
	}
	c.spec = spec
	c.n = n
	c.op = op
	c.back = back
	c.quiet = quiet
	c.demand = demand
	c.at = at
	c.gen = s.blocks.generation()
	c.deadline = start.Add(s.opts.Timeout)
	if s.active.Add(1) == 1 {
		// No other call in flight: decide this one here, saving the hand-off
		// to a batcher and back (two goroutine wake-ups) on an idle gateway.
		one := [1]*call{c}
		s.decide(one[:], c.keys[:0], c.args[:0])
		s.active.Add(-1)
		return s.finish(c, key, <-c.done)
	}
	defer s.active.Add(-1)
	if c.timer == nil {
		c.timer = time.NewTimer(s.opts.Timeout)
	} else {
		c.timer.Reset(s.opts.Timeout)
	}
	select {
	case s.calls <- c:
	default: // queue full: Redis cannot keep up, which is a kind of slow
		c.timer.Stop()
		c.expireAt = nil
		s.pool.Put(c)
		return false, 0, -1, 0, 0, s.unanswered(op, ErrTimeout)
	}
	select {
	case err = <-c.done:
		c.timer.Stop()
		return s.finish(c, key, err)
	case <-c.timer.C:
		// The batcher may still answer into c.done; c is left to the GC.
		return false, 0, -1, 0, 0, s.unanswered(op, ErrTimeout)
	}
}

// maxCachedBlock is the longest a refusal is answered locally: another gateway
// may give a pass back in Redis any moment (a countOn failure rule's
// success, a cost answer's unused tokens, a pass a later rule refused, a
// client leaving a queue), and this one learns of it within maxCachedBlock, not
// at the end of the window or the period (a day's quota refused on one
// gateway for hours while Redis held a token). Under a flood, a value costs
// Redis at most one refused call per maxCachedBlock from each gateway.
const maxCachedBlock = time.Second

// finish takes a decided call's outcome, remembers a block until the
// window can take the call's tokens, or the tokens leased for as long as
// they may be used, and recycles c. Both instants count from the call's
// start, which precedes the script's clock read, so neither outlives what
// the script said.
func (s *Service) finish(c *call, key string, err error) (bool, time.Duration, int64, time.Duration, int64, error) {
	if err != nil && err != ErrClosed {
		s.unanswered(c.op, err)
	}
	ok, left, leaves, retry, stamp := c.ok, c.left, c.leaves, time.Duration(0), int64(0)
	if err == nil && ok && (c.op == opAcquire || c.op == opAcquireLeft) {
		stamp = c.own
	}
	start := c.at
	if err == nil && !ok {
		retry = c.retry
	}
	if c.expireAt == nil && (err != nil || !ok || (c.op != opAcquireLeft && c.op != opPeekLeft)) {
		left, leaves = -1, 0 // a window's figures come with an opAcquireLeft or opPeekLeft pass only
	}
	if err == nil && !ok && c.retry > 0 {
		// Another gateway may give a pass back any moment: the refusal is
		// kept briefly, not until the window or period could take the call
		// by the passes alone. A refusal from the cache still says when
		// that is: Retry-After is never short.
		until := min(start+c.retry, start+maxCachedBlock)
		s.blocks.add(c.spec, key, c.n, start, until, start+c.retry, c.gen)
		// Tokens given back while the call was in flight (its script ran
		// before they reached Redis: they go with the next call) may make
		// room: the block is not kept, so that the next call takes them to
		// Redis. Added first, then checked: a give-back after the check
		// finds the block noted and drops it itself (giveBack).
		if c.expireAt == nil && s.leases.hasVoid(c.spec, key) {
			s.blocks.forget(c.spec, key, false)
		}
	}
	if c.demand > 0 {
		var extra int64
		if err == nil && ok {
			extra = c.extra
		}
		s.leases.grant(c.spec, key, extra, c.stamp, start, start+c.leaseFor, left, start+leaves)
		if c.quiet {
			left, leaves = -1, 0 // asked for the lease, not by the caller
		} else if left >= 0 {
			left += extra // the lease's tokens are this gateway's to pass
		}
	}
	c.spec, c.key, c.ok, c.retry, c.demand, c.extra, c.leaseFor, c.at, c.gen, c.slot, c.op = nil, "", false, 0, 0, 0, 0, 0, 0, 0, opAcquire
	c.void, c.voidAt, c.stamp, c.own, c.back = 0, 0, 0, 0, 0
	c.expireAt, c.reset, c.left, c.leaves, c.quiet = nil, 0, 0, 0, false
	s.pool.Put(c)
	return ok, retry, left, leaves, stamp, err
}

// Close stops the batchers, removes this gateway from the gateway set (so
// avgLocal rules stop counting it at once) and closes the Redis client.
// Acquire after Close returns ErrClosed. Close is idempotent.
func (s *Service) Close() error {
	var err error
	s.once.Do(func() {
		s.closed.Store(true)
		close(s.quit)
		s.wg.Wait()
		s.leave()
		err = s.rdb.Close()
	})
	return err
}

// leave removes this gateway from the gateway set, once, so that avgLocal
// rules stop counting it at once; no heartbeat adds it back.
func (s *Service) leave() {
	s.beatMu.Lock() // waits out a heartbeat in flight, which could re-add us
	defer s.beatMu.Unlock()
	if s.left.Swap(true) || !s.up.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(s.opts.Timeout, 100*time.Millisecond))
	s.rdb.ZRem(ctx, s.gwKey, s.opts.GatewayID)
	cancel()
}

// Run sends heartbeats every Options.Heartbeat and, while Redis is failing,
// probes it with backoff until it answers. It returns when ctx is done or the
// Service is closed, leaving no goroutine behind. A gateway's ctx ends at
// the shutdown's signal: it then leaves the gateway set at once, as it
// takes no new calls, though its calls in flight still use the Service
// until Close; left in the set until Close, after the drain, the fleet's
// avgLocal limits counted it (a draining gateway's share) for the whole drain.
func (s *Service) Run(ctx context.Context) {
	probe := minProbe
	var upSince, lastBeat time.Time
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.leave()
			return
		case <-s.quit:
			return
		case <-t.C:
		}
		wasUp := s.up.Load()
		if !wasUp || time.Since(lastBeat) >= s.opts.Heartbeat-s.opts.Heartbeat/8 {
			s.beat(ctx)
			lastBeat = time.Now()
		} else {
			s.count(ctx)
		}
		if s.up.Load() {
			if !wasUp {
				upSince = time.Now()
			}
			// The backoff restarts only once Redis has stayed up a while, so
			// a flapping Redis is probed ever less often, not every 50ms.
			if time.Since(upSince) > stableUp {
				probe = minProbe
			}
			next := s.opts.Heartbeat - time.Since(lastBeat)
			if s.avgInUse() {
				// avgLocal windows count with the readings gateways pass
				// them: read the live gateways four times a heartbeat, so a
				// gateway that left stops counting within a quarter of it.
				next = min(next, s.opts.Heartbeat/4)
			}
			due := time.Now().Add(next)
			s.sendQuotaReturns(ctx, due)
			t.Reset(max(time.Until(due), time.Millisecond))
		} else {
			t.Reset(probe)
			probe = min(2*probe, maxProbe)
		}
	}
}

// count reads the live gateways between heartbeats, for avgLocal windows.
func (s *Service) count(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	res, err := s.scripts.count.Run(ctx, s.rdb, []string{s.gwKey}, s.expiry).Int64Slice()
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return
	}
	if err == nil {
		s.noteGateways(res)
	}
	s.report(err, false)
}

// reading is a count of the live gateways and when it was made (Redis ms),
// boxed once as the script's arguments.
type reading struct {
	at, n       int64
	nArg, atArg any
}

// noteGateways keeps a reading ({count, Redis ms}) if it is newer than the
// one kept.
func (s *Service) noteGateways(res []int64) {
	if len(res) != 2 {
		return
	}
	r := &reading{at: res[1], n: res[0], nArg: res[0], atArg: res[1]}
	for {
		old := s.gateways.Load()
		if old != nil && old.at >= r.at {
			return
		}
		if old != nil && r.n < old.n && s.recovering() {
			// Redis is back from a failure, and the others have not all
			// announced themselves on it yet: a gateway that reads one
			// live gateway would take the whole global count as its share
			// while the others still pass theirs (a Sentinel failover
			// passed 60 in a second against a count of 40).
			r = &reading{at: r.at, n: old.n, nArg: old.nArg, atArg: r.atArg}
		}
		if s.gateways.CompareAndSwap(old, r) {
			return
		}
	}
}

// recovering reports whether Redis answered again, after failing, within
// the time the other gateways take to announce themselves on it: their
// probe's longest backoff and three heartbeats (a gateway's entry lives
// three heartbeats).
func (s *Service) recovering() bool {
	at := s.backAt.Load()
	return at != 0 && time.Since(s.epoch)-time.Duration(at) < maxProbe+3*s.opts.Heartbeat
}

// avgInUse reports whether an avgLocal rule was asked for within the last
// three heartbeats.
func (s *Service) avgInUse() bool {
	at := s.avgAt.Load()
	return at != 0 && time.Since(s.epoch)-time.Duration(at) < 3*s.opts.Heartbeat
}

// beat announces this gateway; it doubles as the probe while Redis is down.
func (s *Service) beat(ctx context.Context) {
	s.beatMu.Lock()
	defer s.beatMu.Unlock()
	if s.closed.Load() || s.left.Load() {
		return // removed from the set (leave); do not add it back
	}
	if !s.up.Load() {
		// A probe dials anew (the connections whose calls timed out were
		// dropped), and the dial's HELLO costs a round trip a call on a
		// pooled connection does not pay: a connection is made first,
		// within the dial's allowance, and the probe's script is then
		// judged by the time a call takes. With a Redis answering in 15 ms
		// under a 20 ms timeout, every probe failed (two round trips) and
		// cluster limiting never resumed.
		wctx, wcancel := context.WithTimeout(ctx, s.rdb.DialTimeout()+s.opts.Timeout)
		_ = s.rdb.Exists(wctx, s.gwKey).Err() // the script below reports the outcome
		wcancel()
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	sent := time.Now()
	res, err := s.scripts.beat.Run(ctx, s.rdb, []string{s.gwKey, s.liftKey}, s.opts.GatewayID, s.expiry).Int64Slice()
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // shutting down, not a Redis failure
	}
	if err == nil && len(res) == 3 {
		// Redis read its clock about halfway through the round trip.
		s.skew.Store(res[1] - sent.Add(time.Since(sent)/2).UnixMilli())
		if s.known.Load() && !s.up.Load() {
			// Back from a failure: noted before the reading, which it keeps
			// from falling (noteGateways).
			s.backAt.Store(int64(max(time.Since(s.epoch), 1)))
		}
		s.noteGateways(res[:2])
		s.noteLifts(res[2])
	}
	ms, err := s.probeMasters(ctx, err)
	s.report(err, true)
	s.noteStatus(ms)
}

// noteLifts clears the block cache when the namespace's lift counter moved
// since the last heartbeat: a gateway's ForgetParam emptied a window that
// this gateway may have noted full. Every noted window is asked of Redis
// again, once; lifts are rare. The first reading clears it too: windows
// noted before it (calls served before Run's first heartbeat answered)
// may have been lifted since, and no earlier reading tells.
func (s *Service) noteLifts(n int64) {
	if old := s.lifts.Swap(n); old != n {
		s.blocks.clear()
	}
}

// noLifts is the lift counter before the first heartbeat read it.
const noLifts = -1

// report feeds one round trip's outcome to the breaker. Only a probe (a
// heartbeat from Run) closes an open breaker: a decision that happened to
// succeed on a flaky Redis must not flip the state back and forth.
func (s *Service) report(err error, probe bool) {
	if s.closed.Load() {
		return // a closed client's errors say nothing about Redis
	}
	if err == nil {
		if s.fails.Load() != 0 {
			s.fails.Store(0)
		}
		if probe && (!s.up.Load() || !s.known.Load()) {
			s.setState(true, nil)
		}
		return
	}
	if s.fails.Add(1) >= failThreshold && s.up.Load() {
		s.setState(false, err)
	}
}

// setState changes the state once, logs it once and tells OnState once. The
// first state found (by the first heartbeat, or by failures before it) is
// reported too, so a gauge fed by OnState starts right.
func (s *Service) setState(up bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := !s.known.Load()
	if s.up.Load() == up && !first {
		return
	}
	s.known.Store(true)
	s.fails.Store(0)
	s.up.Store(up)
	// the gauge first, then the log: a reader of the log finds the metrics
	// already saying so (an e2e test read 0 right after "reachable again")
	if s.opts.OnState != nil {
		s.opts.OnState(up)
	}
	s.noteStatus(nil)
	if up && first {
		s.opts.Log.Info().Str("gateway", s.opts.GatewayID).Str("redis", s.rdb.String()).Msg("cluster: redis reachable; cluster limiting on")
	} else if up {
		s.opts.Log.Info().Str("gateway", s.opts.GatewayID).Str("redis", s.rdb.String()).Msg("cluster: redis reachable again; cluster limiting resumed")
	} else {
		s.opts.Log.Warn().Err(err).Str("gateway", s.opts.GatewayID).Str("redis", s.rdb.String()).
			Msg("cluster: redis failing; cluster rules fall back until it answers again")
	}
}
