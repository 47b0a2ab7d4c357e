package window

import "unsafe"

var sizeofExact = int(unsafe.Sizeof(Exact{}))

// FloorDiv is a/b rounded towards minus infinity, so that instants before
// the clock's origin land in the right bucket.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Mod is a mod n in [0, n): the ring slot of bucket number a.
func Mod(a, n int64) int64 {
	m := a % n
	if m < 0 {
		m += n
	}
	return m
}
