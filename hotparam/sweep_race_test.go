//go:build race

package hotparam_test

// Under the race detector the phase sweep takes about 4x longer: a corner
// of it there, and CI runs it whole without it (see .ci/run).
const carryMaxCount = 4
