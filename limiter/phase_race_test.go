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
)
