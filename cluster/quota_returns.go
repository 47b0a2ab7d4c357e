package cluster

import (
	"context"
	"strings"
	"sync"
	"time"
)

// maxQuotaReturns bounds the calendar quota give-backs a gateway keeps
// while Redis fails: past it they are lost, and stay charged for their
// period, which only ever passes less.
const maxQuotaReturns = 4096

// quotaResendWithin is how long after its first send a give-back whose
// round trip failed may be sent again. Redis forgets its mark
// quotaMarkLife after taking it, and it may take it late (it had stalled
// with the give-back in its socket) but never before it was sent: sent
// again within half that life, a give-back finds the mark unless it is
// itself held up in Redis for another minute. Past it, it is dropped and
// stays charged for its period, which only ever passes less. One never
// sent (the breaker open) has no mark to outlive and is kept while its
// period lasts.
const quotaResendWithin = quotaMarkLife / 2

// quotaReturns holds calendar quota give-backs (GiveBackQuota) Redis did
// not take: a countOn failure call let in while Redis answered and
// answered with a success while it failed held its place in the period,
// and dropping the give-back charged the client a failure it did not
// make, for the rest of the day (an audit: 2 guesses left of 3 after one
// success). Both kinds are kept: those not sent (the breaker open) and
// those whose round trip failed, which may have reached Redis (a
// timeout): each carries its id, and Redis takes a give-back once by its
// id (the acquire script's op 5), so sending it again never gives a place
// back twice. Run sends them once Redis answers, each only while its
// period lasts and, once sent, for quotaResendWithin.
type quotaReturns struct {
	mu sync.Mutex
	q  []quotaReturn
	// sending is held while Run sends what it took, so that a test can
	// wait for the sends in flight (QuotaReturnsKept).
	sending sync.Mutex
}

// quotaReturn is one give-back: n calls off value's period that starts at
// stamp (Unix ms), taken by Redis once by id (nextBackID).
type quotaReturn struct {
	spec     *ruleSpec
	value    string
	n, stamp int64
	id       uint64
	sent     time.Time // its first send (the wall clock); zero: never sent
}

// add keeps a give-back to send again; its value may alias the caller's
// buffer.
func (r *quotaReturns) add(x quotaReturn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.q) < maxQuotaReturns {
		x.value = strings.Clone(x.value)
		r.q = append(r.q, x)
	}
}

// putBack keeps again give-backs taken (take) and not sent: q ahead of
// any kept since, in its order, so the oldest go first (the nearest to
// their period's end or to quotaResendWithin), and failed, if not nil,
// last of all.
func (r *quotaReturns) putBack(q []quotaReturn, failed *quotaReturn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q = append(q, r.q...)
	if failed != nil {
		q = append(q, *failed)
	}
	r.q = q[:min(len(q), maxQuotaReturns)]
}

// take empties the queue and returns what it held.
func (r *quotaReturns) take() []quotaReturn {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.q
	r.q = nil
	return q
}

// kept is how many give-backs wait to be sent.
func (r *quotaReturns) kept() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.q)
}

// sendQuotaReturns gives back, now that Redis answers, what it did not
// take while it failed, one round trip each, until due; what it has not
// sent by then is kept, in its order, for Run's next round. At the first
// that fails again, that one and the rest are kept too: a Redis failing
// again costs Run one round trip, not one for each give-back. The one
// that failed goes last, so that one Redis cannot take (a Cluster's
// shard down) does not hold up the others. One is sent even past due, so
// that the backlog drains when a slow beat took the whole period.
//
// Run beats and counts on this goroutine: sent until the backlog was
// empty, up to maxQuotaReturns round trips (minutes on a slow Redis)
// held up the heartbeat, the gateway dropped out of the live set and the
// others' avgLocal shares grew. due is when Run's next beat or count is
// due, rather than a fixed share of the period: the backlog drains in the
// time Run would sleep, as fast as one after another did (a fixed share
// would drain 4096 for minutes, past quotaResendWithin for those already
// sent once, which are then dropped), and a beat is late by one
// give-back's round trip at most. A pipeline would send many in one
// round trip, but it fails or times out as a whole, on a Redis Cluster
// shard by shard, so "the one that failed goes last" would have to
// become "those of the shards that failed".
func (s *Service) sendQuotaReturns(ctx context.Context, due time.Time) {
	s.quotaReturns.sending.Lock()
	defer s.quotaReturns.sending.Unlock()
	q := s.quotaReturns.take()
	for i := range q {
		if i > 0 && (ctx.Err() != nil || !time.Now().Before(due)) {
			s.quotaReturns.putBack(q[i:], nil)
			return
		}
		if err := s.giveBackQuota(&q[i]); err != nil {
			s.quotaReturns.putBack(q[i+1:], &q[i])
			return
		}
	}
}
