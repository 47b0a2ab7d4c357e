//go:build !race

package proxy_test

// raceEnabled: under -race sync.Pool drops items at random, so allocation
// counts are not meaningful.
const raceEnabled = false
