package config

import (
	"encoding/json"
	"errors"
	"time"
)

// Target is one server of an upstream, written as its URL or as
// {url, weight}.
type Target struct {
	URL    string `yaml:"url" json:"url"`
	Weight int    `yaml:"weight" json:"weight"` // default 1
}

// fromScalar reads the short form: the URL alone.
func (t *Target) fromScalar(s string) { *t = Target{URL: s} }

// UnmarshalJSON reads either form.
func (t *Target) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*t = Target{URL: s}
		return nil
	}
	type plain Target
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return errors.New("config: a target must be a URL string or {url, weight}")
	}
	*t = Target(p)
	return nil
}

// HealthCheck configures active probes of each target (docs/upstreams.md).
type HealthCheck struct {
	Path               string   `yaml:"path" json:"path"`
	Interval           Duration `yaml:"interval" json:"interval"`
	Timeout            Duration `yaml:"timeout" json:"timeout"`
	HealthyThreshold   int      `yaml:"healthyThreshold" json:"healthyThreshold"`
	UnhealthyThreshold int      `yaml:"unhealthyThreshold" json:"unhealthyThreshold"`
}

// Passive configures ejection of targets that fail live traffic. It is on
// by default; ConsecutiveFailures 0 turns it off.
type Passive struct {
	ConsecutiveFailures int      `yaml:"consecutiveFailures" json:"consecutiveFailures"`
	EjectFor            Duration `yaml:"ejectFor" json:"ejectFor"`
	MaxEjectedPercent   int      `yaml:"maxEjectedPercent" json:"maxEjectedPercent"`
}

// Upstream balance modes.
const (
	BalanceRoundRobin   = "roundRobin"
	BalanceLeastRequest = "leastRequest"
	BalanceHash         = "hash"
)

// Defaults of the upstream settings (docs/upstreams.md).
const (
	DefaultConnectTimeout      = 2 * time.Second
	DefaultUpstreamIdleTimeout = 30 * time.Second
	DefaultRetryBudget         = 0.2
	DefaultHealthInterval      = 5 * time.Second
	DefaultHealthTimeout       = time.Second
	DefaultHealthyThreshold    = 2
	DefaultUnhealthyThreshold  = 3
	DefaultConsecutiveFailures = 5
	DefaultEjectFor            = 30 * time.Second
	DefaultMaxEjectedPercent   = 50
)

// Bounds of the upstream settings: what the balancer can hold (targets are
// a fixed-size set per request; weights scale a hash ring's points) and
// values past which a setting is surely a typo.
const (
	MaxTargets       = 256
	MaxTargetWeight  = 1000
	MaxRetries       = 256       // retries; each is within timeout and the budget
	maxUpstreamTimer = time.Hour // connectTimeout, idleTimeout, health checks, ejectFor
)

func (c *checker) applyUpstreamDefaults() {
	for name, u := range c.cfg.Upstreams {
		p := "upstreams." + name
		if !c.has(p + ".timeout") {
			u.Timeout = Duration(DefaultUpstreamTimeout)
		}
		if !c.has(p + ".connectTimeout") {
			// A short timeout bounds the connect too: an upstream with
			// timeout 300ms is not refused for the default's 2s.
			u.ConnectTimeout = Duration(DefaultConnectTimeout)
			if u.Timeout > 0 && u.Timeout < u.ConnectTimeout {
				u.ConnectTimeout = u.Timeout
			}
		}
		if !c.has(p + ".idleTimeout") {
			u.IdleTimeout = Duration(DefaultUpstreamIdleTimeout)
		}
		if !c.has(p + ".protocol") {
			u.Protocol = ProtocolHTTP1
		}
		if !c.has(p + ".balance") {
			u.Balance = BalanceRoundRobin
		}
		if !c.has(p + ".retryBudget") {
			u.RetryBudget = DefaultRetryBudget
		}
		for i := range u.Targets {
			if !c.has(idx(p+".targets", i) + ".weight") {
				u.Targets[i].Weight = 1
			}
		}
		if h := u.HealthCheck; h != nil {
			hp := p + ".healthCheck"
			if !c.has(hp + ".interval") {
				h.Interval = Duration(DefaultHealthInterval)
			}
			if !c.has(hp + ".timeout") {
				// A probe may take at most interval: 1s, or a shorter interval.
				h.Timeout = Duration(DefaultHealthTimeout)
				if h.Interval > 0 {
					h.Timeout = min(h.Timeout, h.Interval)
				}
			}
			if !c.has(hp + ".healthyThreshold") {
				h.HealthyThreshold = DefaultHealthyThreshold
			}
			if !c.has(hp + ".unhealthyThreshold") {
				h.UnhealthyThreshold = DefaultUnhealthyThreshold
			}
		}
		// Passive ejection is on unless the file turns it off
		// (consecutiveFailures: 0), as Envoy's outlier detection.
		if u.Passive == nil {
			u.Passive = &Passive{}
		}
		if ps := u.Passive; ps != nil {
			pp := p + ".passive"
			if !c.has(pp + ".consecutiveFailures") {
				ps.ConsecutiveFailures = DefaultConsecutiveFailures
			}
			if !c.has(pp + ".ejectFor") {
				ps.EjectFor = Duration(DefaultEjectFor)
			}
			if !c.has(pp + ".maxEjectedPercent") {
				ps.MaxEjectedPercent = DefaultMaxEjectedPercent
			}
		}
		c.cfg.Upstreams[name] = u
	}
}
