package cluster

import "errors"

// Cause is why Redis did not decide a call, which the caller then decides
// by its rule's fallback (locally, or by letting the call pass). The
// breaker's state (sluice_cluster_redis_up) shows Redis down; these show
// the calls a Redis that is up but slow or failing left to the fallback.
type Cause uint8

const (
	CauseDown    Cause = iota // the breaker is open: the call was not sent
	CauseTimeout              // no answer within Options.Timeout (or the call queue was full)
	CauseError                // Redis answered with an error, or the connection failed
)

// Causes is every Cause, in order, for a metric's series.
var Causes = [...]Cause{CauseDown, CauseTimeout, CauseError}

func (c Cause) String() string {
	switch c {
	case CauseDown:
		return "down"
	case CauseTimeout:
		return "timeout"
	}
	return "error"
}

// unanswered reports err, the failure of a call of op, to
// Options.OnUnanswered, and returns it. A give-back decides nothing: it
// is sent again or left (its tokens stay counted, which only passes less).
func (s *Service) unanswered(op int64, err error) error {
	if s.opts.OnUnanswered != nil && op != opGiveBack {
		s.opts.OnUnanswered(causeOf(err))
	}
	return err
}

func causeOf(err error) Cause {
	switch {
	case err == ErrUnavailable:
		return CauseDown
	case errors.Is(err, ErrTimeout):
		return CauseTimeout
	}
	return CauseError
}
