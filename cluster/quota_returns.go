package cluster

import (
	"strings"
	"sync"
)

// maxQuotaReturns bounds the calendar quota give-backs a gateway keeps
// while Redis fails: past it they are lost, and stay charged for their
// period, which only ever passes less.
const maxQuotaReturns = 4096

// quotaReturns holds calendar quota give-backs (GiveBackQuota) Redis did
// not take: a countOn failure call let in while Redis answered and
// answered with a success while it failed held its place in the period,
// and dropping the give-back charged the client a failure it did not
// make, for the rest of the day (an audit: 2 guesses left of 3 after one
// success). Only those not sent (the breaker open) are kept: one whose
// round trip failed may have reached Redis. Run sends them once Redis
// answers, each only while its period lasts.
type quotaReturns struct {
	mu sync.Mutex
	q  []quotaReturn
}

// quotaReturn is one give-back: n calls off value's period that starts at
// stamp (Unix ms), taken by Redis once by id (nextBackID).
type quotaReturn struct {
	spec     *ruleSpec
	value    string
	n, stamp int64
	id       uint64
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

// take empties the queue and returns what it held.
func (r *quotaReturns) take() []quotaReturn {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.q
	r.q = nil
	return q
}

// sendQuotaReturns gives back, now that Redis answers, what was not sent
// while it failed.
func (s *Service) sendQuotaReturns() {
	for _, r := range s.quotaReturns.take() {
		if err := s.giveBackQuota(r); err == ErrUnavailable { // not sent
			s.quotaReturns.add(r)
		}
	}
}
