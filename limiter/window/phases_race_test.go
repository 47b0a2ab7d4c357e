//go:build race

package window_test

// Under the race detector the sweep is ~20x slower: one phase there, and
// CI runs the whole sweep without it (see .ci/run).
func sweepPhases() []int64 { return []int64{0} }
