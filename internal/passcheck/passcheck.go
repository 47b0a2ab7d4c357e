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

// Offer calls try(i, at) for the i-th call at start + i*step (ns; a float,
// so that a rate need not divide a second) for as long as at < end, and
// returns the instants of the calls try passed.
func Offer(start, end int64, step float64, try func(i, at int64) (passed bool)) []int64 {
	var passed []int64
	for i := int64(0); ; i++ {
		at := start + int64(float64(i)*step)
		if at >= end {
			return passed
		}
		if try(i, at) {
			passed = append(passed, at)
		}
	}
}
