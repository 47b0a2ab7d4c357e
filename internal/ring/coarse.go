package ring

import (
	"math"
)

// Coarse is the cheapest sliding window: two counts (such as passes and
// blocks) kept in two buckets of width ns, the current one and the one
// before, and the window's sum estimated by weighting the older bucket by
// how much of it still lies in the window that ends now (a sliding-window
// counter). It costs 20 bytes and no allocation, where a Ring costs a slice
// and its header: it is for a count per key of a bounded map (a hot
// parameter's value), where a Ring per key would cost more than the key.
//
// The estimate is exact while every count of the last width ns fell in the
// current bucket, and otherwise assumes the older bucket's counts were spread
// evenly over it. Counts saturate at math.MaxUint32 per bucket. The zero
// Coarse is empty. Not safe for concurrent use: its owner's lock guards it.
type Coarse struct {
	num  uint32 // the current bucket's number (floor(now/width)), modulo 2^32
	cur  [2]uint32
	prev [2]uint32
}

// Add adds n to count i (0 or 1) at now, in buckets of width ns (the same
// width at every call). An instant older than the current bucket counts in
// it.
func (c *Coarse) Add(now, width int64, i int, n uint32) {
	k := uint32(FloorDiv(now, width))
	if c.cur == [2]uint32{} && c.prev == [2]uint32{} {
		c.num = k // empty: nothing to slide
	}
	switch d := int32(k - c.num); {
	case d == 1:
		c.prev, c.cur, c.num = c.cur, [2]uint32{}, k
	case d > 1:
		c.prev, c.cur, c.num = [2]uint32{}, [2]uint32{}, k
	}
	c.cur[i] = uint32(min(uint64(c.cur[i])+uint64(n), math.MaxUint32))
}

// Sum estimates both counts over the width ns that end at now.
func (c *Coarse) Sum(now, width int64) (a, b float64) {
	k := FloorDiv(now, width)
	// The part of the window that lies in the bucket before k.
	older := 1 - float64(now-k*width)/float64(width)
	cur, prev := c.cur, c.prev
	switch d := int32(uint32(k) - c.num); {
	case d == 1:
		cur, prev = [2]uint32{}, cur
	case d > 1:
		return 0, 0
	}
	return float64(cur[0]) + older*float64(prev[0]), float64(cur[1]) + older*float64(prev[1])
}
