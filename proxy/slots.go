package proxy

import "sluice/config"

// slotRules says which routes' calls hold a slot counted in flight: a flow
// or param rule of grade concurrency (on the route's resource, or on a
// resource a relate rule reads the concurrency of), system.maxConcurrency,
// or the adaptive system check (which reads the calls in flight). SPEC §3
// says such a slot is released when the client leaves, and the upstream
// call is cancelled (its connection closed) then too. fasthttp's call
// cannot be cancelled: run apart from the request, the abandoned calls
// piled up on the upstream past the limit (a client could open and drop
// thousands, until the pool of connections to the target was spent and
// other routes got 502s); holding the slot until the upstream answered
// broke SPEC §3. So auto sends these routes the standard path
// (route.forwarderFor).
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
			if r.Strategy == config.StrategyRelate {
				// The rule counts the calls of refResource.
				s.resources[r.RefResource] = true
			}
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
