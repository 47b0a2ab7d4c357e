package proxy

import "sluice/config"

// slotRules says which routes' calls hold a slot counted in flight: a flow
// or param rule of grade concurrency, system.maxConcurrency, or the
// adaptive system check (which reads the calls in flight). SPEC §3 says
// such a slot is released when the client leaves; the fast path, whose
// upstream call cannot be cancelled, then waits for the upstream apart from
// the request (fastForwarder.doLeavable), which only these routes pay for.
type slotRules struct {
	// all: every route's call may hold one (a system check, or an API
	// group's rule: groups are matched per request, by path).
	all       bool
	resources map[string]bool
}

func newSlotRules(cfg *config.Config) slotRules {
	s := slotRules{
		all:       cfg.System.MaxConcurrency > 0 || cfg.System.Adaptive,
		resources: map[string]bool{},
	}
	for _, r := range cfg.FlowRules {
		if r.Grade == config.GradeConcurrency {
			s.resources[r.Resource] = true
		}
	}
	for _, r := range cfg.ParamRules {
		if r.Grade == config.GradeConcurrency {
			s.resources[r.Resource] = true
		}
	}
	for _, g := range cfg.APIGroups {
		s.all = s.all || s.resources[g.Name]
	}
	return s
}

// held reports whether a call of resource may hold a slot.
func (s slotRules) held(resource string) bool { return s.all || s.resources[resource] }
