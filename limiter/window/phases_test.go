//go:build !race

package window_test

// sweepPhases are the start phases, from 0 to 999 ms every 37 ms.
func sweepPhases() []int64 {
	var ph []int64
	for p := int64(0); p < 1000; p += 37 {
		ph = append(ph, p*ms)
	}
	return ph
}
