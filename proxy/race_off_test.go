//go:build !race

package proxy

// RaceEnabled: under -race sync.Pool drops items at random, so allocation
// counts are not meaningful, and each request costs several times more.
// Exported for package proxy_test.
const RaceEnabled = false
