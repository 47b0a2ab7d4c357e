//go:build !race

package limiter_test

// The start-phase steps of the sweeps: 1 ms for warm-up, 37 ms for the
// reject table (which also sweeps counts, intervals and tokens).
const (
	phaseStep = ms
	sweepStep = 37 * ms
	// sweepMaxCount: the largest count of the reject table.
	// prioMaxCount: the largest count of the prioritized sweep.
	prioMaxCount  = 1e9
	sweepMaxCount = 1e9
	// warmCallsMaxCount and warmCallsEveryPhase: TestWarmUpWithCallsOfManyTokens whole.
	warmCallsMaxCount   = 1e9
	warmCallsEveryPhase = true
)
