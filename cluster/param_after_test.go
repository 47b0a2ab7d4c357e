package cluster_test

import (
	"testing"

	"sluice/config"
)

// TestParamPeekAndCharge: a countOn failure or responseHeader rule's window
// on synthetic time. PeekParam takes nothing; ChargeParam takes the
// answer's tokens whether or not they fit, those past the window's room
// taking the places of its oldest passes (stamped now), so the value is
// out until they leave it; one charge takes at most count tokens.
func TestParamPeekAndCharge(t *testing.T) {
	clock := new(synthClock)
	s := synthService(t, namespace(t), clock)
	rule := paramRule(5, 10, config.ThresholdGlobal)
	rule.CountOn = "responseHeader:X-Tokens-Used"
	const sec = int64(1e6)
	steps := []struct {
		at     int64 // µs
		charge int64 // > 0: ChargeParam of that many; else PeekParam of peek
		peek   int64
		ok     bool
	}{
		{0, 0, 1, true},
		{0, 0, 5, true},
		{0, 0, 1, true}, // peeks took nothing
		{0, 3, 0, true},
		{1 * sec, 0, 2, true},
		{1 * sec, 0, 3, false},
		{5 * sec, 4, 0, true}, // 2 fit, 2 replace the oldest passes (of 0 s), stamped 5 s
		{9 * sec, 0, 1, false},
		{10*sec + 1, 0, 1, true}, // the one pass left of 0 s has left
		{10*sec + 1, 0, 2, false},
		{15*sec + 1, 0, 5, true},
		{20 * sec, 1000, 0, true}, // at most the whole window, stamped 20 s
		{29 * sec, 0, 1, false},
		{30*sec + 1, 0, 5, true},
	}
	for i, st := range steps {
		clock.us.Store(st.at)
		if st.charge > 0 {
			if err := s.ChargeParam(rule, 5, "v"+t.Name(), st.charge); err != nil {
				t.Fatalf("step %d: ChargeParam: %v", i, err)
			}
			continue
		}
		ok, _, err := s.PeekParam(rule, 5, "v"+t.Name(), st.peek)
		if err != nil || ok != st.ok {
			t.Fatalf("step %d (%dµs): PeekParam(%d) = %v, %v; want %v", i, st.at, st.peek, ok, err, st.ok)
		}
	}
}
