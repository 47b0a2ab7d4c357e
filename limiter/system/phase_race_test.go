//go:build race

package system_test

// Under the race detector the sweep is far slower: a few phases there, and
// CI runs every 37 ms without it (see .ci/run).
const phaseStepMs = 1000
