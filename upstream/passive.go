package upstream

// maxEjectFactor bounds the doubling of ejectFor: 1x, 2x, 4x, 8x, then 10x.
const maxEjectFactor = 10

// passive is a target's ejection state machine. Not safe for concurrent
// use: the target's mutex guards it.
//
// An ejection lasts ejectFor, doubled for each ejection in a row, at most
// 10x. Ejections are in a row when the next one starts within ejectFor of
// the end of the last (the target came back and failed again at once); a
// target that stays in for longer than ejectFor starts again at 1x (as
// Envoy forgets past ejections of a host that behaves).
type passive struct {
	failures int   // consecutive failures since the last success or ejection
	streak   int   // ejections in a row, minus one
	until    int64 // end of the last ejection
	ejected  bool  // an ejection was ever made (until is meaningful)
}

// failed counts a failure at now and reports whether it is the
// consecutiveFailures-th in a row (an ejection is due). Outcomes of requests
// while ejected (sent before, or in panic mode) are ignored: the ejection
// already says what they would.
func (p *passive) failed(now int64, cfg *Passive) bool {
	if p.ejected && now < p.until {
		return false
	}
	p.failures++
	return p.failures >= cfg.ConsecutiveFailures
}

// succeeded resets the failure run.
func (p *passive) succeeded(now int64) {
	if p.ejected && now < p.until {
		return
	}
	p.failures = 0
}

// eject starts an ejection at now and returns its end.
func (p *passive) eject(now int64, cfg *Passive) int64 {
	base := int64(cfg.EjectFor)
	if p.ejected && now-p.until <= base {
		p.streak++
	} else {
		p.streak = 0
	}
	d := base << min(p.streak, 4)
	d = min(d, maxEjectFactor*base)
	p.until, p.ejected, p.failures = now+d, true, 0
	return p.until
}
