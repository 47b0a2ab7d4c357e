// Package passcheck measures what a limiter let through, for the rate
// properties of every package's tests: the one definition of "no real
// interval holds more than count" they assert.
package passcheck

// MostInInterval is the most passes in any real interval [s, s+length) of
// passes, sorted by time: the most is reached with s at a pass, so it
// slides s over every pass.
func MostInInterval[T ~int64](passes []T, length T) int {
	best, j := 0, 0
	for i := range passes {
		for j < len(passes) && passes[j] < passes[i]+length {
			j++
		}
		best = max(best, j-i)
	}
	return best
}
