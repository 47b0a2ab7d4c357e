package upstream

import "sync"

// Retry budget geometry: the share is of the client requests of the last
// 10 s (ten 1 s buckets); the floor is a token bucket of 3 a second holding
// at most 3, full at the start, so a quiet upstream may still retry.
const (
	budgetWidth    = int64(1e9)
	floorPerSecond = 3
	floorBurst     = 3
)

// budget caps an upstream's retries, as Envoy's retry budget and Linkerd's
// do: a retry is allowed while the retries of the last 10 s stay within
// share x the requests of the last 10 s, or else when the floor has a
// token. So over any run that starts with an empty window, retries are at
// most share x requests + 3 a second + 3, and a failing service is not sent
// twice its traffic. Safe for concurrent use.
type budget struct {
	mu     sync.Mutex
	w      counts  // cRequests, cRetries; guarded by mu
	tokens float64 // the floor's tokens; guarded by mu
	filled int64   // when tokens was last topped up
	primed bool
}

func newBudget() *budget { return &budget{w: newCounts(budgetWidth)} }

// request counts one client request (not its retries) at now.
func (b *budget) request(now int64) {
	b.mu.Lock()
	b.w.add(now, cRequests, 1)
	b.mu.Unlock()
}

// take spends one retry at now if the budget allows it, and reports whether
// it did.
func (b *budget) take(now int64, share float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	ok := b.allowLocked(now, share, true)
	if ok {
		b.w.add(now, cRetries, 1)
	}
	return ok
}

// allows reports whether take would succeed now, spending nothing.
func (b *budget) allows(now int64, share float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.allowLocked(now, share, false)
}

func (b *budget) allowLocked(now int64, share float64, spend bool) bool {
	if float64(b.w.total(now, cRetries)+1) <= share*float64(b.w.total(now, cRequests)) {
		return true
	}
	switch {
	case !b.primed:
		b.tokens, b.filled, b.primed = floorBurst, now, true
	case now > b.filled:
		b.tokens = min(floorBurst, b.tokens+float64(now-b.filled)*floorPerSecond/1e9)
		b.filled = now
	}
	if b.tokens < 1 {
		return false
	}
	if spend {
		b.tokens--
	}
	return true
}
