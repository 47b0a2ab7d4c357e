package upstream

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Balance is how an upstream chooses a target for a request.
type Balance uint8

const (
	// RoundRobin is nginx's smooth weighted round robin: over any run of
	// sum(weights) picks each target gets exactly its weight, spread out
	// rather than in bursts.
	RoundRobin Balance = iota
	// LeastRequest draws two different targets at random (in proportion to
	// their weights) and takes the one with fewer requests in flight per
	// unit of weight.
	LeastRequest
	// Hash sends equal keys to the same target by weighted rendezvous
	// hashing, so that a target joining or leaving moves only its own share
	// of the keys.
	// A request without a key is served round robin.
	Hash
)

func (b Balance) String() string {
	switch b {
	case RoundRobin:
		return "roundRobin"
	case LeastRequest:
		return "leastRequest"
	case Hash:
		return "hash"
	}
	return fmt.Sprintf("Balance(%d)", uint8(b))
}

// Target is one server of an upstream. Weight 0 counts as 1.
type Target struct {
	URL    string
	Weight int
}

// HealthCheck configures active probes: each target is sent GET Path every
// Interval (with jitter); a probe is good when it answers 2xx or 3xx within
// Timeout. UnhealthyThreshold bad probes in a row take a target out,
// HealthyThreshold good ones in a row bring it back.
type HealthCheck struct {
	Path               string
	Interval, Timeout  time.Duration
	HealthyThreshold   int
	UnhealthyThreshold int
	// Protocol is the upstream's (see Probe).
	Protocol string
}

// Passive configures ejection from live traffic: ConsecutiveFailures
// failures in a row (connect errors, timeouts, resets, 502/503/504) eject a
// target for EjectFor, doubled for each ejection in a row up to 10x;
// never more than MaxEjectedPercent of the targets are ejected at once.
type Passive struct {
	ConsecutiveFailures int
	EjectFor            time.Duration
	MaxEjectedPercent   int
}

// Spec is one upstream as configured.
type Spec struct {
	Targets     []Target
	Balance     Balance
	HealthCheck *HealthCheck // nil: no active checks (targets count as healthy)
	Passive     *Passive     // nil: no ejection
	// Retries is how many times a request may be sent again, where that is
	// safe (the caller decides what is safe): to a target it has not tried
	// while there is one available, else to one it tried.
	Retries int
	// RetryBudget caps the retries in flight at this share of the requests
	// in flight to the upstream (retries included); 3 are always allowed.
	RetryBudget float64
}

// check reports the first problem that would make the spec unusable; the
// config package reports them all, with lines, before a Spec is built.
func (s *Spec) check() error {
	if len(s.Targets) == 0 {
		return errors.New("no targets")
	}
	if len(s.Targets) > MaxTargets {
		return fmt.Errorf("%d targets; at most %d", len(s.Targets), MaxTargets)
	}
	seen := map[string]bool{}
	for _, t := range s.Targets {
		u, err := url.Parse(t.URL)
		if err != nil || u.Host == "" {
			return fmt.Errorf("target %q is not an absolute URL", t.URL)
		}
		if seen[t.URL] {
			return fmt.Errorf("target %q is listed twice", t.URL)
		}
		seen[t.URL] = true
		if t.Weight < 0 || t.Weight > MaxWeight {
			return fmt.Errorf("target %q: weight %d out of 1..%d", t.URL, t.Weight, MaxWeight)
		}
	}
	if h := s.HealthCheck; h != nil {
		if h.Interval <= 0 || h.Timeout <= 0 || h.HealthyThreshold < 1 || h.UnhealthyThreshold < 1 {
			return errors.New("healthCheck: interval and timeout must be > 0, thresholds >= 1")
		}
	}
	if p := s.Passive; p != nil {
		if p.ConsecutiveFailures < 1 || p.EjectFor <= 0 || p.MaxEjectedPercent < 0 || p.MaxEjectedPercent > 100 {
			return errors.New("passive: consecutiveFailures >= 1, ejectFor > 0, maxEjectedPercent in 0..100")
		}
	}
	if s.Retries < 0 || !(s.RetryBudget >= 0 && s.RetryBudget <= 1) {
		return errors.New("retries must be >= 0 and retryBudget in 0..1")
	}
	return nil
}

// MaxWeight is the largest target weight.
const MaxWeight = 1000
