package circuit

// State is a circuit breaker's state. The zero State is Closed.
type State uint8

const (
	// Closed lets every call through and watches the window.
	Closed State = iota
	// Open blocks every call until retryTimeoutMs has passed since it opened.
	Open
	// HalfOpen lets exactly probeNum probe calls through; all succeeding
	// closes the breaker, one failing re-opens it.
	HalfOpen
)

var stateNames = [...]string{"closed", "open", "half-open"}

// String returns "closed", "open" or "half-open" (the metrics' and logs' value).
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// worse reports whether s is a worse state than t (open > half-open > closed),
// for summarising several breakers of one resource.
func (s State) worse(t State) bool { return rank(s) > rank(t) }

func rank(s State) int {
	switch s {
	case Open:
		return 2
	case HalfOpen:
		return 1
	}
	return 0
}
