//go:build race

package upstream_test

const raceEnabled = true
