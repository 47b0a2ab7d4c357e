package upstream

import "sync"

// smooth is nginx's smooth weighted round robin (ngx_http_upstream_get_peer):
// every pick adds each candidate's weight to its current value, takes the
// candidate with the largest, and takes the candidates' total weight off the
// winner. Weights 5,1,1 give a a b a c a a, not a a a a a b c. A target that
// is not a candidate (down, ejected, tried) neither gains nor is picked, so
// the others share its turns in proportion to their weights.
type smooth struct {
	mu      sync.Mutex
	current []int64 // guarded by mu
}

func (s *smooth) pick(ts []*member, cand *Set) int {
	s.mu.Lock()
	best, total := -1, int64(0)
	for i, m := range ts {
		if !cand.Has(i) {
			continue
		}
		s.current[i] += m.weight
		total += m.weight
		if best < 0 || s.current[i] > s.current[best] {
			best = i
		}
	}
	if best >= 0 {
		s.current[best] -= total
	}
	s.mu.Unlock()
	return best
}
