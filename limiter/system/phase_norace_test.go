//go:build !race

package system_test

// phaseStepMs is the start-phase step of the sweeps, ms.
const phaseStepMs = 37
