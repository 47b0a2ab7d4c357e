//go:build !race

package upstream_test

// raceEnabled: under -race allocation counts are not meaningful.
const raceEnabled = false
