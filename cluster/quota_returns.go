package cluster

import (
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

// putBack keeps again give-backs taken (take) and not sent.
func (r *quotaReturns) putBack(q []quotaReturn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.q = append(r.q, q[:min(len(q), maxQuotaReturns-len(r.q))]...)
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
// take while it failed. At the first that fails again, that one and the
// rest are kept for Run's next round: a Redis failing again costs Run one
// round trip, not one for each give-back. The one that failed goes last,
// so that one Redis cannot take (a Cluster's shard down) does not hold
// up the others.
func (s *Service) sendQuotaReturns() {
	s.quotaReturns.sending.Lock()
	defer s.quotaReturns.sending.Unlock()
	q := s.quotaReturns.take()
	for i := range q {
		if err := s.giveBackQuota(&q[i]); err != nil {
			s.quotaReturns.putBack(q[i+1:])
			s.quotaReturns.putBack(q[i : i+1])
			return
		}
	}
}
