package hotparam

// maxCost is the largest figure ParseCost gives: 2^53, exact as a float64
// (and a Lua number in the cluster's scripts). A rule's charge is capped far
// lower, at its value's full bucket (chargeDebt).
const maxCost = 1 << 53

// ParseCost reads the figure of a countOn responseHeader:NAME rule from
// the values of NAME in an answer (each header line as sent; a line may be
// a comma-separated list). An element is well formed when it is decimal
// digits only, with optional spaces or tabs around them; a figure past
// 2^53 reads as 2^53. Every other element (a sign, a fraction, an
// exponent, letters, an empty element) is ignored. The figure is the
// largest well-formed element, so that an answer that reports twice is
// charged the higher figure; ok is false when there is none (no header,
// or nothing well formed), and the call then costs its acquireCount. It
// allocates nothing.
func ParseCost(values []string) (cost int64, ok bool) {
	for _, v := range values {
		for start := 0; start <= len(v); {
			end := start
			for end < len(v) && v[end] != ',' {
				end++
			}
			if c, good := parseElement(v[start:end]); good && (!ok || c > cost) {
				cost, ok = c, true
			}
			start = end + 1
		}
	}
	return cost, ok
}

// parseElement reads one element of a cost list: OWS digits OWS.
func parseElement(s string) (int64, bool) {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if i == j {
		return 0, false
	}
	var n int64
	for ; i < j; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n < maxCost {
			n = n*10 + int64(c-'0')
		}
	}
	return min(n, maxCost), true
}
