package circuit

import "sync"

// resource is what one resource's breakers share: the state last reported to
// onChange. A resource reports its summary, the worst state of its breakers
// (open > half-open > closed), not each breaker's own transitions: callers
// export one sluice_circuit_state per resource, and with two rules on it the
// last breaker to move is not the resource's state (one closing while the
// other stays open must not read as closed).
//
// It outlives reloads: Compile hands it from one Set to the next while the
// resource keeps any degrade rule, and points it at the new Set's breakers,
// so a rule edited while open (a new, closed breaker) or removed reports the
// resource's new state at once instead of leaving the metric stuck.
//
// Goroutine safe. Lock order: a breaker's mu, then resource.mu.
type resource struct {
	name string

	mu       sync.Mutex
	list     []*breaker // the breakers of the latest compiled Set
	reported State      // last state given to onChange (Closed at first)
	onChange func(resource string, from, to State)
}

// changed reports the resource's summary if it differs from the last one
// reported. Called after a breaker of the resource stored a new state.
//
// Reading the breakers' states under mu is what keeps the reports exact
// under concurrency: each state store happens before its changed call takes
// mu, so whichever call runs last sees every store and reports the final
// summary; reports come in order and never repeat a state.
func (r *resource) changed() {
	r.mu.Lock()
	r.report()
	r.mu.Unlock()
}

// report is changed with mu held.
func (r *resource) report() {
	now := summary(r.list)
	if now == r.reported {
		return
	}
	from := r.reported
	r.reported = now
	if r.onChange != nil {
		r.onChange(r.name, from, now)
	}
}

// summary is the worst state of list (Closed if empty).
func summary(list []*breaker) State {
	var worst State
	for _, b := range list {
		if st := public(b.state.Load()); st.worse(worst) {
			worst = st
		}
	}
	return worst
}

// attach makes list (possibly empty: the resource lost its rules) the
// resource's breakers from now on and reports the summary if that changed it.
func (r *resource) attach(list []*breaker, onChange func(resource string, from, to State)) {
	r.mu.Lock()
	r.list, r.onChange = list, onChange
	r.report()
	r.mu.Unlock()
}
