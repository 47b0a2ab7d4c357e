package config

// DefaultErrorStatuses is a degrade rule's errorStatuses when the file
// gives none: every 5xx answer. A new slice each call, so no rule shares it.
func DefaultErrorStatuses() []string { return []string{"5xx"} }

// ParseStatus reads one entry of a status list (degradeRules' errorStatuses):
// a code, 100..599 ("429"; YAML's 429 arrives as that string), or a class,
// "1xx".."5xx" (either case of x). It returns the codes it stands for,
// lo..hi inclusive, and false if s is neither.
func ParseStatus(s string) (lo, hi int, ok bool) {
	if len(s) != 3 || s[0] < '1' || s[0] > '5' {
		return 0, 0, false
	}
	first := int(s[0]-'0') * 100
	if (s[1] == 'x' || s[1] == 'X') && (s[2] == 'x' || s[2] == 'X') {
		return first, first + 99, true
	}
	if s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9' {
		return 0, 0, false
	}
	code := first + int(s[1]-'0')*10 + int(s[2]-'0')
	return code, code, true
}

// StatusSet is a set of HTTP statuses 0..599 as bits, for a list of
// statuses config validated (errorStatuses, failureStatuses): reading it
// allocates nothing. The zero StatusSet is empty.
type StatusSet [(600 + 63) / 64]uint64

// NewStatusSet is the set of the codes list stands for (ParseStatus); an
// entry ParseStatus cannot read is skipped.
func NewStatusSet(list []string) StatusSet {
	var s StatusSet
	for _, e := range list {
		lo, hi, ok := ParseStatus(e)
		if !ok {
			continue
		}
		for c := lo; c <= hi; c++ {
			s.Add(c)
		}
	}
	return s
}

// Add puts status (0..599; others are ignored) in s.
func (s *StatusSet) Add(status int) {
	if status >= 0 && status < 600 {
		s[status/64] |= 1 << (status % 64)
	}
}

// Has reports whether status is in s.
func (s *StatusSet) Has(status int) bool {
	if status < 0 || status >= 600 {
		return false
	}
	return s[status/64]&(1<<(status%64)) != 0
}
