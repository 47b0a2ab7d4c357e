package hotparam

import (
	"container/heap"
	"context"
	"math"
	"slices"
	"time"

	"sluice/config"
	"sluice/internal/match"
)

// RuleState is what one param rule of a resource knows of some of its
// values now, for operators (the admin API's /api/params).
type RuleState struct {
	Rule    *config.ParamRule // as compiled; the caller must not modify it
	Ord     int               // the rule's place among its resource's param rules, from 0
	Tracked int               // how many values the rule tracks now
	Values  []ValueState
}

// ValueState is one value of a rule now. Passes and Blocks are estimated
// over the last minute (internal/ring.Coarse); a dryRun rule's would-be
// blocks count as blocks. Remaining and NextToken are what a call of one
// token would find: for a qps reject rule, the tokens left (at most count)
// and how long until one more is there (0 when the bucket is full); for a
// throttle rule, how many calls may still join the queue and how long the
// next one would wait; for a concurrency rule, the calls that may still
// start (InFlight are running). For a clusterMode rule they are the
// cluster's (Shared) when Redis answers: for a window, read by a Reader;
// for a calendar quota (window day or month), what it has left of the
// period and the time until its reset, read by a QuotaPeeker. Else they
// are this gateway's local figures (what its fallback would decide on).
type ValueState struct {
	// Value is the value as the client sent it; one longer than 64 bytes
	// is tracked by a digest and shown as its first bytes, "…#" and the
	// digest (Digest), unless it was asked for by its whole value. Forget
	// takes either.
	Value     string
	Digest    bool
	Tracked   bool // false: the value has no state (a full bucket)
	Applies   bool // false: the rule's match leaves the value out
	Passes    float64
	Blocks    float64
	Remaining float64
	NextToken time.Duration
	InFlight  int64
	Count     float64 // the threshold that applies to the value (an item's, else the rule's)
	Shared    bool    // Remaining and NextToken are the cluster's
}

// Reader is a TokenService that can also read a value's state in the
// cluster without taking a token (sluice/cluster), for Report: the tokens
// its window holds (a calendar quota: the calls of this period) and how
// long until the oldest leaves (a quota: until its reset).
type Reader interface {
	ReadParam(ctx context.Context, rule *config.ParamRule, count float64, value string) (used float64, wait time.Duration, err error)
}

// readTimeout bounds the cluster reads of one Report.
const readTimeout = 2 * time.Second

// Report returns, per rule of the checker in file order, the figures of
// values, tracked or not, without taking a token, tracking a value or
// making it recent; with no values, the top values (at most top) with the
// most blocks in the last minute, most first, each with at least one. It
// takes each shard lock in turn (every shard, for the top values): it is
// for the admin API, not the request path.
func (c *Checker) Report(now int64, values []string, top int) []RuleState {
	if c == nil {
		return nil
	}
	out := make([]RuleState, len(c.rules))
	rd, _ := c.cluster.(Reader)
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	for i, r := range c.rules {
		out[i] = RuleState{Rule: r.cfg, Ord: i, Tracked: r.table.Len()}
		// A cluster rule's local bucket is its fallback's: this gateway's
		// share of a global count (as a call decided locally is charged).
		share := r.localShare(c.cluster)
		if len(values) == 0 {
			out[i].Values = r.top(now, top, share)
		} else {
			for _, v := range values {
				out[i].Values = append(out[i].Values, r.peek(now, v, share))
			}
		}
		if r.cluster && !r.calendar && rd != nil {
			for j := range out[i].Values {
				r.shared(ctx, rd, c.cluster.Gateways(), &out[i].Values[j])
			}
		}
	}
	if qp, ok := c.cluster.(QuotaPeeker); ok {
		for i, r := range c.rules {
			if r.calendar {
				r.peekQuotas(ctx, qp, out[i].Values)
			}
		}
	}
	return out
}

// QuotaPeeker is a TokenService that can read what a value's calendar
// quota has left in Redis without taking any (sluice/cluster), for
// Report. reset is the time until the period's reset.
type QuotaPeeker interface {
	PeekQuota(ctx context.Context, rule *config.ParamRule, count float64, value string) (left int64, reset time.Duration, err error)
}

// peekQuotas replaces a calendar quota's local figures in vs by what the
// cluster has left of each value's period (Remaining) and the time until
// its reset (NextToken), where Redis answers; a value kept as a digest,
// whose bytes are gone, keeps the local figures. Outside every lock: one
// round trip a value.
func (r *rule) peekQuotas(ctx context.Context, qp QuotaPeeker, vs []ValueState) {
	for j := range vs {
		v := &vs[j]
		if v.Digest || !v.Applies || v.Count == 0 {
			continue
		}
		left, reset, err := qp.PeekQuota(ctx, r.cfg, v.Count, v.Value)
		if err != nil {
			continue
		}
		v.Remaining, v.NextToken, v.Shared = float64(left), reset, true
	}
}

// shared puts the cluster's figures for s's value in s, if the cluster
// answers. A value listed by its digest cannot be asked for: the cluster
// keys it by its whole bytes.
func (r *rule) shared(ctx context.Context, rd Reader, gateways int, s *ValueState) {
	if s.Digest || !s.Applies || ctx.Err() != nil {
		return
	}
	used, wait, err := rd.ReadParam(ctx, r.cfg, s.Count, s.Value)
	if err != nil {
		return
	}
	k := math.Floor(s.Count + 1e-9)
	if r.cfg.ClusterConfig.ThresholdType == config.ThresholdAvgLocal {
		k = math.Floor(s.Count*float64(gateways) + 1e-9)
	}
	s.Remaining, s.NextToken, s.Shared = max(k-used, 0), wait, true
}

// peek is val's state without touching the table.
func (r *rule) peek(now int64, val string, share int) ValueState {
	val = r.asKeyed(val)
	// An empty value is never limited (SPEC §3 Sources: a request without
	// the parameter passes the rule).
	vs := ValueState{Value: val, Applies: val != "" && r.match.Match(val)}
	e, sh := r.table.Peek(val)
	defer sh.Unlock()
	if e != nil {
		r.state(&e.V, now, share, &vs)
		vs.Tracked = true
		return vs
	}
	// Untracked: the state a first call would find.
	var fresh value
	r.initValue(&fresh, val)
	r.state(&fresh, now, share, &vs)
	return vs
}

// top is the values with the most blocks in the last minute, at most n,
// most first (then by value). It keeps the n best in a heap as it walks
// the table, and reads a value's whole state only when it enters the
// heap: sorting the state of every value blocked (all of a table of
// 100,000 whose client varies the value) took 208 ms and 43 MB a read,
// holding each shard's lock for its part, while calls waited on it.
func (r *rule) top(now int64, n, share int) []ValueState {
	if n <= 0 {
		return nil
	}
	h := make(worstFirst, 0, min(n, 64))
	r.table.Each(func(name string, digest bool, v *value) {
		_, b := v.seen.Sum(now, seenWidth)
		if b < 0.5 {
			return
		}
		b = math.Round(b)
		if len(h) == n && !before(b, name, h[0].Blocks, h[0].Value) {
			return
		}
		s := ValueState{Value: name, Digest: digest, Tracked: true, Applies: true}
		r.state(v, now, share, &s)
		if len(h) < n {
			heap.Push(&h, s)
		} else {
			h[0] = s
			heap.Fix(&h, 0)
		}
	})
	vs := []ValueState(h)
	slices.SortFunc(vs, func(a, b ValueState) int {
		if before(a.Blocks, a.Value, b.Blocks, b.Value) {
			return -1
		}
		return 1
	})
	return vs
}

// before reports whether a value with blocks a named an is listed before
// one with blocks b named bn: more blocks first, then by name.
func before(a float64, an string, b float64, bn string) bool {
	if a != b {
		return a > b
	}
	return an < bn
}

// worstFirst is a heap of the top list so far, the one listed last at
// its root.
type worstFirst []ValueState

func (h worstFirst) Len() int { return len(h) }
func (h worstFirst) Less(i, j int) bool {
	return before(h[j].Blocks, h[j].Value, h[i].Blocks, h[i].Value)
}
func (h worstFirst) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *worstFirst) Push(x any)   { *h = append(*h, x.(ValueState)) }
func (h *worstFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// state fills s with what v holds at now (see ValueState). It is the one
// place that reads a value's state for operators: a new kind of rule adds
// its case here. The caller holds v's shard lock (or owns v). share is
// the fallback's share a cluster rule's bucket is kept at (1: the whole
// count).
func (r *rule) state(v *value, now int64, share int, s *ValueState) {
	s.Passes, s.Blocks = v.seen.Sum(now, seenWidth)
	s.Passes, s.Blocks = math.Round(s.Passes), math.Round(s.Blocks)
	p := &r.params[v.param]
	s.Count = p.count
	if p.never {
		return // nothing left, ever
	}
	st := v.state.Load()
	switch r.kind {
	case kindInFlight:
		s.InFlight = st
		s.Remaining = float64(max(p.inFlight-st, 0))
	case kindQueue:
		// The next call would pass at the queue's tail plus one spacing.
		wait := max(st+costOf(p, 1)-now, 0)
		s.NextToken = time.Duration(wait)
		if wait <= r.maxQueue {
			s.Remaining = math.Floor(float64(r.maxQueue-wait)/p.emission) + 1
		}
	case kindBucket:
		_, tau, count, emission := bucketOf(p, 1, share)
		if r.calendar && r.periodOver(v, now) {
			s.Remaining = max(count, 1) // full again at its next call
			return
		}
		room := tau - (max(st, now) - now) // nanoseconds of tokens left
		s.Remaining = max(min(math.Floor(float64(room)/emission), max(count, 1)), 0)
		switch {
		case r.calendar:
			// A calendar quota's local bucket gets nothing back within the
			// period: the next call is let in at the reset.
			if end := periodEnd(v); end != 0 && s.Remaining < 1 {
				s.NextToken = time.Duration(end - now)
			}
		case st > now:
			// In debt (countOn responseHeader), one token is there once
			// the debt is paid.
			s.NextToken = time.Duration(math.Ceil(max(math.Floor(float64(room)/emission)+1, 1)*emission) - float64(room))
		}
	}
}

// Forgetter is a TokenService that can also forget a value's shared state
// (sluice/cluster: its window in Redis), for Checker.Forget.
type Forgetter interface {
	ForgetParam(ctx context.Context, rule *config.ParamRule, count float64, value string) error
}

// Forget forgets val in every rule of the checker (an operator lifting a
// lockout): its next call starts afresh, as a value never seen. A call
// still holding a token of val ends on the forgotten state, so for a
// while more calls may be in flight or queued than the rule allows. For a
// clusterMode rule the cluster's state is forgotten too, if the checker's
// TokenService is a Forgetter; err is the first failure (the local state
// is forgotten regardless). A value tracked by a digest may be named as
// Report lists it; the cluster keys such a value by its whole bytes, so
// only the whole value reaches the cluster's state. It returns how many
// rules tracked val.
func (c *Checker) Forget(ctx context.Context, val string) (forgotten int, err error) {
	if c == nil {
		return 0, nil
	}
	f, _ := c.cluster.(Forgetter)
	for _, r := range c.rules {
		val := r.asKeyed(val)
		if r.table.Forget(val) {
			forgotten++
		}
		if r.cluster && f != nil {
			if e := f.ForgetParam(ctx, r.cfg, r.params[r.paramOf(val)].count, val); e != nil && err == nil {
				err = e
			}
		}
	}
	return forgotten, err
}

// asKeyed is an operator's val as the rule's source keys it: an ip rule
// keys a client by its canonical address (match.Addr), so ::ffff:127.0.0.1
// and 127.0.0.1:5555 name the 127.0.0.1 it tracks, where they lifted
// nothing and still answered 200.
func (r *rule) asKeyed(val string) string {
	if len(r.key) != 1 || r.key[0].Kind != config.SourceIP {
		return val
	}
	h := match.HostOnly(val)
	if a, ok := match.Addr(h); ok {
		return match.AddrString(a, h)
	}
	return val
}
