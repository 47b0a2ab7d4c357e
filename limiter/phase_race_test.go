//go:build race

package limiter_test

// Under the race detector the phase sweeps take ~20x longer: every 37 ms
// there, and CI runs them in 1 ms steps without it (see .ci/run).
const phaseStep = 37 * ms
