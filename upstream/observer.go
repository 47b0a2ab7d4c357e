package upstream

// Observer receives an upstream's events (Prometheus in production). It is
// asked for the observers of each upstream and target when a Pool builds
// them, so that per-request calls only add to counters resolved in advance.
// Implementations must be safe for concurrent use, and their per-request
// methods (Answered, Retried, Panicked) should not allocate.
type Observer interface {
	Upstream(name string) UpstreamObserver
	Target(upstream, target string) TargetObserver
}

// UpstreamObserver receives one upstream's events.
type UpstreamObserver interface {
	Retried()  // a request was sent again
	Panicked() // a request was served in panic mode (no target available)
}

// TargetObserver receives one target's events.
type TargetObserver interface {
	// Answered counts one attempt sent to the target: code is the status it
	// answered, or 0 for a transport failure (connect error, reset, timeout).
	Answered(code int)
	Ejected() // the target was ejected
}

// Forgetter is an Observer that is also told, at a Commit, of each target
// and upstream the committed snapshot no longer has, so that it can drop
// what it keeps for them (metric series: target URLs change with
// deployments, and the series of targets long gone would pile up).
type Forgetter interface {
	ForgetTarget(upstream, target string)
	ForgetUpstream(name string)
}

type nopObserver struct{}

func (nopObserver) Upstream(string) UpstreamObserver     { return nopObserver{} }
func (nopObserver) Target(string, string) TargetObserver { return nopObserver{} }
func (nopObserver) Retried()                             {}
func (nopObserver) Panicked()                            {}
func (nopObserver) Answered(int)                         {}
func (nopObserver) Ejected()                             {}
