package config

import (
	"math"
	"slices"
	"strings"

	"sluice/internal/match"
)

// upstreams checks every upstream: its targets, timeouts, balancing, health
// checks, ejection and retries (docs/upstreams.md).
func (c *checker) upstreams() {
	names := make([]string, 0, len(c.cfg.Upstreams))
	for n := range c.cfg.Upstreams {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		u, p := c.cfg.Upstreams[n], "upstreams."+n
		c.targets(p, u.Targets)
		if u.Timeout <= 0 {
			c.add(p+".timeout", "must be > 0, got %s", u.Timeout)
		}
		if c.timer(p+".connectTimeout", u.ConnectTimeout) && u.Timeout > 0 && u.ConnectTimeout > u.Timeout {
			c.add(p+".connectTimeout", "must be <= timeout (%s), got %s", u.Timeout, u.ConnectTimeout)
		}
		c.timer(p+".idleTimeout", u.IdleTimeout)
		if c.oneOf(p+".balance", u.Balance, BalanceRoundRobin, BalanceLeastRequest, BalanceHash) {
			c.hashOn(n, p, u)
		}
		if h := u.HealthCheck; h != nil {
			hp := p + ".healthCheck"
			switch {
			case h.Path == "":
				c.add(hp+".path", "is required (the path probed on each target, like /healthz)")
			case h.Path[0] != '/':
				c.add(hp+".path", "must start with \"/\", got %s", quote(h.Path))
			case strings.ContainsAny(h.Path, "# \t\r\n"):
				c.add(hp+".path", "must be a URL path (and query), without spaces or a fragment, got %s", quote(h.Path))
			}
			interval := c.timer(hp+".interval", h.Interval)
			if c.timer(hp+".timeout", h.Timeout) && interval && h.Timeout > h.Interval {
				c.add(hp+".timeout", "must be <= interval (%s), got %s", h.Interval, h.Timeout)
			}
			c.threshold(hp+".healthyThreshold", h.HealthyThreshold)
			c.threshold(hp+".unhealthyThreshold", h.UnhealthyThreshold)
		}
		if ps := u.Passive; ps != nil {
			pp := p + ".passive"
			if n := ps.ConsecutiveFailures; n < 0 || n > math.MaxInt32 {
				c.add(pp+".consecutiveFailures", "must be >= 0 (0 turns ejection off), got %d", n)
			}
			c.timer(pp+".ejectFor", ps.EjectFor)
			if ps.MaxEjectedPercent < 0 || ps.MaxEjectedPercent > 100 {
				c.add(pp+".maxEjectedPercent", "must be in 0..100, got %d", ps.MaxEjectedPercent)
			}
		}
		switch {
		case u.Retries < 0:
			c.add(p+".retries", "must be >= 0, got %d", u.Retries)
		case u.Retries > MaxRetries:
			c.add(p+".retries", "must be at most %d, got %d", MaxRetries, u.Retries)
		}
		if !(u.RetryBudget >= 0 && u.RetryBudget <= 1) {
			c.add(p+".retryBudget", "must be a share in 0..1 of the requests (0.2 is a fifth), got %s", num(u.RetryBudget))
		}
	}
}

func (c *checker) targets(p string, ts []Target) {
	if len(ts) == 0 {
		c.add(p+".targets", "at least one target is required")
		return
	}
	if len(ts) > MaxTargets {
		c.add(p+".targets", "at most %d targets, got %d", MaxTargets, len(ts))
	}
	seen := map[string]int{}
	for i, t := range ts {
		tp := idx(p+".targets", i)
		if t.URL == "" {
			c.add(tp, "needs a url (a target is a URL, or {url, weight})")
		} else if msg := checkTarget(t.URL); msg != "" {
			if c.has(tp + ".url") {
				tp += ".url"
			}
			c.add(tp, "%s", msg)
		} else if first, dup := seen[match.TargetKey(t.URL)]; dup {
			c.add(tp, "duplicate target %s (also targets[%d], %s)", quote(t.URL), first, quote(ts[first].URL))
		} else {
			seen[match.TargetKey(t.URL)] = i
		}
		if t.Weight < 1 || t.Weight > MaxTargetWeight {
			c.add(tp+".weight", "must be in 1..%d, got %d", MaxTargetWeight, t.Weight)
		}
	}
}

// hashOn: balance hash needs a source, and only hash uses one; a path
// source must be a parameter of every route of the upstream, or those
// routes would never hash.
func (c *checker) hashOn(name, p string, u Upstream) {
	if c.bad[p+".hashOn"] {
		return
	}
	if u.Balance != BalanceHash {
		if !u.HashOn.IsZero() {
			c.add(p+".hashOn", "is only used with balance: hash (balance is %s)", u.Balance)
		}
		return
	}
	if u.HashOn.IsZero() {
		c.add(p+".hashOn", "is required with balance: hash (%s)", sourceForms)
		return
	}
	if u.HashOn.Kind != SourcePath {
		return
	}
	for i, r := range c.cfg.Routes {
		if r.Upstream != name {
			continue
		}
		params, _, msg := checkPattern(r.Path)
		if msg == "" && !slices.Contains(params, u.HashOn.Name) {
			c.add(p+".hashOn", "routes[%d] (%s) sends to this upstream but has no path parameter {%s}", i, r.Path, u.HashOn.Name)
		}
	}
}

// timer checks a duration that must be > 0 and at most an hour; it reports
// whether the value is fine.
func (c *checker) timer(path string, d Duration) bool {
	if d <= 0 || d.D() > maxUpstreamTimer {
		c.add(path, "must be > 0 and <= 1h, got %s", d)
		return false
	}
	return true
}

func (c *checker) threshold(path string, n int) {
	if n < 1 || n > math.MaxInt32 {
		c.add(path, "must be >= 1, got %d", n)
	}
}
