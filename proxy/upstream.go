package proxy

import (
	"fmt"
	"net/url"
	"slices"
	"time"

	"sluice/config"
	ups "sluice/upstream"
)

// upstream is a named set of targets as one snapshot forwards to it. The
// choice of target, health, ejection and the retry budget are the upstream
// package's (bal), whose state outlives snapshots in the gateway's Pool;
// connections live in the transports, which outlive snapshots too.
type upstream struct {
	name    string
	bal     *ups.Upstream
	targets []*url.URL    // bal's targets, by index
	fast    []*fastTarget // parallel to targets; nil until the fast path is built
	timeout time.Duration
	connect time.Duration // connectTimeout
	idle    time.Duration // idleTimeout: a pooled connection idle this long is closed
	// protocol is config's: http1, h2c or h2. Only http1 can take the
	// fast path (fasthttp speaks HTTP/1.1).
	protocol string
	hashOn   config.Source
	retries  int
}

func (g *Gateway) newUpstream(name string, u config.Upstream) (*upstream, error) {
	bal, err := g.upstreams.Build(name, upstreamSpec(u))
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	up := &upstream{name: name, bal: bal, timeout: u.Timeout.D(), connect: u.ConnectTimeout.D(), idle: u.IdleTimeout.D(), protocol: u.Proto(),
		hashOn: u.HashOn, retries: u.Retries}
	if u.Balance != config.BalanceHash {
		up.hashOn = config.Source{}
	}
	for i := range bal.Len() {
		up.targets = append(up.targets, bal.URL(i))
	}
	return up, nil
}

// upstreamSpec is config's upstream, defaulted and validated, as the
// upstream package takes it.
func upstreamSpec(u config.Upstream) ups.Spec {
	s := ups.Spec{Balance: balanceOf(u.Balance), Retries: u.Retries, RetryBudget: u.RetryBudget}
	for _, t := range u.Targets {
		s.Targets = append(s.Targets, ups.Target{URL: t.URL, Weight: t.Weight})
	}
	if h := u.HealthCheck; h != nil {
		s.HealthCheck = &ups.HealthCheck{Path: h.Path, Interval: h.Interval.D(), Timeout: h.Timeout.D(),
			HealthyThreshold: h.HealthyThreshold, UnhealthyThreshold: h.UnhealthyThreshold, Protocol: u.Proto()}
	}
	if p := u.Passive; p != nil && p.ConsecutiveFailures > 0 {
		s.Passive = &ups.Passive{ConsecutiveFailures: p.ConsecutiveFailures, EjectFor: p.EjectFor.D(),
			MaxEjectedPercent: p.MaxEjectedPercent}
	}
	return s
}

// balanceOf is the balance config has validated: roundRobin, leastRequest
// or hash.
func balanceOf(b string) ups.Balance {
	switch b {
	case config.BalanceLeastRequest:
		return ups.LeastRequest
	case config.BalanceHash:
		return ups.Hash
	}
	return ups.RoundRobin
}

// committed lists a snapshot's upstreams, by name, for the Pool.
func committed(m map[string]*upstream) []*ups.Upstream {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*ups.Upstream, len(names))
	for i, n := range names {
		out[i] = m[n].bal
	}
	return out
}

// tries is the upstream side of one request: its attempts (the targets it
// was sent to, the attempt in progress) and its hash key. It lives in the
// pooled exchange; its zero value is a request not yet sent.
type tries struct {
	att    ups.Tries
	now    int64 // when the attempt in progress was chosen
	key    uint64
	hasKey bool
	// kept: the request has no body, or its body is kept to be sent again.
	kept bool
}

// hashKey reads the request's hashOn value (route.serve, before the
// guards) for first and retry; ok is false when the request has several
// distinct ones, which it cannot be balanced on (400).
func (u *upstream) hashKey(ex *exchange) (ok bool) {
	if u.hashOn.Kind == config.SourceNone {
		return true
	}
	v, found, ok := ex.one(u.hashOn)
	if found {
		ex.try.key, ex.try.hasKey = ups.HashKey(v), true
	}
	return ok
}

// first chooses the target of a request's first attempt, at ex.try.now
// (the request's start).
func (u *upstream) first(ex *exchange) int {
	t := &ex.try
	now := t.now
	i := u.bal.Pick(now, t.key, t.hasKey, &t.att)
	t.now = now
	return i
}

// failKind is how an attempt failed, which decides whether it may be sent
// again (docs/upstreams.md#retries).
type failKind uint8

const (
	// failOther: a timeout, a malformed answer, a failure after the answer
	// began: never retried.
	failOther failKind = iota
	// failConnect: the connection failed before anything was sent.
	failConnect
	// failReset: the target closed or reset the connection before any byte
	// of the answer.
	failReset
	// failStatus: the target answered 502, 503 or 504.
	failStatus
)

// retryable reports whether an attempt that failed so may be sent again:
// a connect failure whatever the method, if the body (if any) is kept or
// none of it was read (the fast path finds a stale pooled connection only
// once the header and the body's first bytes fill its write buffer); a
// reset or a 502/503/504 only for an idempotent method whose body (if any)
// is kept to be sent again.
func retryable(method string, kind failKind, kept, bodyRead bool) bool {
	switch kind {
	case failConnect:
		return kept || !bodyRead
	case failReset, failStatus:
		return kept && idempotent(method)
	}
	return false
}

func idempotent(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE":
		return true
	}
	return false
}

// retry settles the failed attempt in progress (code: the target's status,
// 0 for none) and chooses the target of the next one (one not tried yet
// while there is one), when the failure is retryable and the upstream
// allows another retry now; otherwise it returns -1 and leaves the attempt
// to be settled when the request ends. The attempts loop retries through it.
func (rt *route) retry(ex *exchange, method string, kind failKind, code int) int {
	u := rt.upstream
	t := &ex.try
	from := t.att.Current()
	if u.retries == 0 || from < 0 || !retryable(method, kind, t.kept, ex.bodyRead()) {
		return -1
	}
	now := rt.snap.clock.Now()
	j := u.bal.Retry(now, t.key, t.hasKey, &t.att, code)
	if j < 0 {
		return -1
	}
	if e := rt.snap.log.Debug(); e.Enabled() {
		e.Str("upstream", u.name).Str("from", u.targets[from].Host).Str("to", u.targets[j].Host).Int("code", code).
			Int("attempt", t.att.Sent()).Msg("upstream attempt failed: retrying")
	}
	t.now = now
	return j
}

// settle reports the request's last attempt to the balancer when the
// request ends: finished is false when forwarding panicked (a broken
// answer), gone when the client left.
func (rt *route) settle(ex *exchange, now int64, finished, gone bool) {
	if ex.try.att.Current() < 0 {
		return
	}
	code, o := ex.status, ups.Success
	switch {
	case ex.bodyFailed(), gone && ex.status == 0:
		code, o = 0, ups.Abandoned
	case gone && !finished:
		// The client hung up while the answer streamed (the copy to it
		// broke): the target answered, and is not to blame.
		o = ups.Abandoned
	case !finished, ex.failed:
		code, o = 0, ups.Failure
	case ups.FailureStatus(code):
		o = ups.Failure
	}
	rt.upstream.bal.Done(now, &ex.try.att, code, o)
}
