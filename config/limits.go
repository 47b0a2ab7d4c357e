package config

// Limits of what the gateway can hold. Validation refuses a file that goes
// past any of them (a fixture in testdata for each), so the compilers
// (limiter, hotparam, limiter/circuit, cluster, proxy) never meet such a
// value and do not check it again. Nor do they default a zero field or
// refuse an enum value: rules built in code rather than read from a file get
// their defaults from Defaults, which runs applyDefaults as Load does, and
// the compilers take every Config as config gives it (compilers_test.go in
// the repository root reads their source for config.Default... and for an
// enum switch that answers an unknown value with an error).
const (
	// MaxCount bounds every rule count (flowRules, paramRules and their
	// items) and a route's acquireCount. It keeps a count, plus one call's
	// tokens, exact in the float64 and int64 arithmetic of the limiter,
	// hotparam (a concurrency count is an int64) and the cluster's Redis
	// scripts; the qps window itself (limiter/window) would hold more.
	MaxCount = 1 << 31
	// MaxDegradeRulesPerResource bounds the degrade rules of one resource:
	// a call's circuit token marks the breakers it probes in one 64-bit word.
	MaxDegradeRulesPerResource = 64
	// MaxDurationMs bounds every time given in ms, and MaxDurationSec every
	// time given in seconds: one year. The guards hold times as int64
	// nanoseconds, which a few hundred years would overflow.
	MaxDurationMs  = 365 * 24 * 3600 * 1000
	MaxDurationSec = MaxDurationMs / 1000
)

// blockReasons are the values blockResponse.body is rendered with for each
// route when the gateway is built: the five reasons a block can have, then
// "dryrun" and "" (rendered, never sent). The limiter names them;
// TestBlockBodyRenderedForEveryReason keeps the two lists together.
var blockReasons = [...]string{"flow", "param", "degrade", "system", "authority", "dryrun", ""}

// MaxOccupyTimeoutMs bounds a route's occupyTimeoutMs (a prioritized call's
// wait; a rule's window looks at most one statIntervalMs ahead anyway).
const MaxOccupyTimeoutMs = 60_000
