//go:build race

package calendar_test

// Under the race detector the sweep of every zone takes ~20x longer: one
// zone in 20 there, and CI runs it whole without it (see .ci/run).
const zoneStride = 20
