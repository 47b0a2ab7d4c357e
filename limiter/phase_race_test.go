//go:build race

package limiter_test

// Under the race detector the phase sweeps take ~20x longer: a few phases
// there, and CI runs them whole without it (see .ci/run).
const (
	phaseStep = 250 * ms
	sweepStep = sec
	// sweepMaxCount: the largest count of the reject table.
	// prioMaxCount: the largest count of the prioritized sweep.
	prioMaxCount  = 100
	sweepMaxCount = 1000
	// warmCallsMaxCount and warmCallsEveryPhase bound the warm-up sweep by
	// call size (TestWarmUpWithCallsOfManyTokens), whose counts of 1,000
	// and 10,000 take 30,000 calls a second for 35 s: 108 s under -race.
	warmCallsMaxCount   = 100
	warmCallsEveryPhase = false
)
