//go:build !race

package limiter_test

// phaseStep is the step of the start-phase sweeps: 1 ms.
const phaseStep = ms
