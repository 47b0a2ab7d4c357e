package limiter_test

import (
	"testing"
)

// A steady 3x overload must never let a real interval pass more than
// count*1.1, the first interval included, and must still pass ~count per
// interval. Several start phases relative to the bucket grid are tried.
func TestRejectRealIntervalsBound(t *testing.T) {
	for _, count := range []float64{10, 100, 1000} {
		for _, phase := range []int64{0, 1, 7 * ms, 19*ms + 999, 333 * ms} {
			f := compile(t, qps("r", count))
			c := f.Checker("r", "default")
			start := t0 + phase
			passes := drive(c, start, 20*sec, 3*count, "", 1)
			got := maxInInterval(passes, sec)
			t.Logf("count %v phase %d: max %d", count, phase, got)
			if limit := int(count * 1.1); got > limit {
				t.Errorf("count %v phase %d: a real 1 s interval passed %d > %d", count, phase, got, limit)
			}
			if total, want := len(passes), int(20*count); total < want*95/100 || total > want*102/100 {
				t.Errorf("count %v phase %d: passed %d in 20 s, want about %d", count, phase, total, want)
			}
		}
	}
}
