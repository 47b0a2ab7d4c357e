package window

import "math"

// WholeCalls is the window in which a limit of count calls per interval
// (ns) is decided in whole calls, and how many it passes there: the count
// floored, per interval; a count under one call an interval would pass
// none, so the window widens to the fewest whole intervals m that hold one
// and passes floor(m x count) there (0.5 a second: one call in any 2 s; 0.3:
// one in any 4 s). Flow rules, system.maxQps and cluster windows all read a
// count this way, and their RateLimit fields say so. m is capped so that the
// window's length stays within its arithmetic (MaxInt64/4 ns); a count too
// small to hold one call there passes none.
func WholeCalls(count float64, interval int64) (ns int64, limit float64) {
	if !(count > 0 && count < 1) || interval <= 0 {
		return interval, math.Floor(count)
	}
	m := min(math.Ceil(1/count), float64(math.MaxInt64/4/interval))
	return int64(m) * interval, math.Floor(m*count + 1e-9)
}

// ClusterWholeCalls is WholeCalls as the cluster's window script reads a
// limit (count x live gateways for avgLocal): nudged by 1e-9 before it is
// floored, so that 0.1 x 10 gateways is 1, not 0.9999999999999999; a
// count of 0 stays 0.
func ClusterWholeCalls(count float64, interval int64) (ns int64, limit float64) {
	if count > 0 {
		count += 1e-9
	}
	return WholeCalls(count, interval)
}
