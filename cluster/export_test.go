package cluster

import (
	"context"
	"time"

	"sluice/config"
)

// AcquireSrc lets the baseline benchmark run the same script one call at a time.
const AcquireSrc = acquireSrc

// RingSlots is the most slots a window's ring has; HeaderBytes precede
// them. ResultsPerCall is how many numbers the script returns per call.
const (
	RingSlots      = ringSlots
	HeaderBytes    = headerBytes
	ResultsPerCall = resultsPerCall
)

// DisableLeases makes every call go to Redis, to measure that path.
func (s *Service) DisableLeases() { s.noLease = true }

// SetClock makes the Service decide at clock() (Redis µs, as a Duration)
// instead of Redis's TIME, and run its caches on that timeline: tests on
// synthetic time against a real Redis. Set it before use.
func (s *Service) SetClock(clock func() time.Duration) { s.clock = clock }

// SetWallClock makes calendar quotas read now() instead of time.Now, for
// their periods and their blocks: tests on synthetic dates against a real
// Redis. The dates must be in the future (a key expires a little after its
// period's reset, on Redis's clock). Set it before use.
func (s *Service) SetWallClock(now func() time.Time) { s.now = now }

// GiveBackQuotaID sends one calendar quota give-back with the id given, as
// GiveBackQuota's first send or a later one would, and returns its error;
// nothing is kept to send again.
func (s *Service) GiveBackQuotaID(rule *config.ParamRule, count float64, value string, n, stamp int64, id uint64) error {
	return s.giveBackQuota(&quotaReturn{spec: s.specs.param(rule, count), value: value, n: n, stamp: stamp, id: id})
}

// QuotaMarkLife is how long Redis keeps a give-back's mark (at most);
// QuotaResendWithin how long after its first send a give-back may be sent
// again.
const (
	QuotaMarkLife     = quotaMarkLife
	QuotaResendWithin = quotaResendWithin
)

// SendQuotaReturns sends the calendar quota give-backs kept, as Run does
// once Redis answers, with no time limit.
func (s *Service) SendQuotaReturns() {
	s.sendQuotaReturns(context.Background(), time.Now().Add(time.Hour))
}

// QuotaReturnsKept is how many calendar quota give-backs wait to be sent
// again, once Run's sends in flight are done.
func (s *Service) QuotaReturnsKept() int {
	s.quotaReturns.sending.Lock()
	defer s.quotaReturns.sending.Unlock()
	return s.quotaReturns.kept()
}

// StopBeating makes the Service stop its heartbeats without leaving the
// gateway set, as a gateway that crashed (Run goes on, beating nothing).
func (s *Service) StopBeating() { s.left.Store(true) }
