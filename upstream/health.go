package upstream

// health is a target's active-check state machine: up until
// unhealthyThreshold bad probes in a row, then down until healthyThreshold
// good ones in a row. A target starts up, so a new target takes traffic at
// once (passive ejection and retries cover one that is down from the start).
// Not safe for concurrent use: the target's mutex guards it.
type health struct {
	down       bool
	good, bad  int   // probes in a row
	since      int64 // when down last changed (0: never)
	lastProbe  int64
	lastResult bool
}

// observe records a probe result at now and reports whether the target
// changed between up and down.
func (h *health) observe(now int64, good bool, hc *HealthCheck) (changed bool) {
	h.lastProbe, h.lastResult = now, good
	if good {
		h.good, h.bad = h.good+1, 0
		if h.down && h.good >= hc.HealthyThreshold {
			h.down, h.since = false, now
			return true
		}
		return false
	}
	h.good, h.bad = 0, h.bad+1
	if !h.down && h.bad >= hc.UnhealthyThreshold {
		h.down, h.since = true, now
		return true
	}
	return false
}
