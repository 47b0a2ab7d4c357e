package upstream

import "sync/atomic"

// minRetryConcurrency is how many retries may always be in flight to an
// upstream, whatever its traffic (Envoy's min_retry_concurrency), so that a
// quiet upstream still gets its retries.
const minRetryConcurrency = 3

// budget caps an upstream's retries in flight, as Envoy's retry budget
// does: a retry may start while the retries in flight stay within share x
// the requests in flight to the upstream (every attempt, retries included,
// as Envoy counts its active requests), or within minRetryConcurrency. A
// failing service under load is so sent at most share more than its
// traffic, while a request now and then is always retried. Safe for
// concurrent use; it takes no lock.
type budget struct {
	retrying atomic.Int64 // retries in flight
}

// limit is how many retries may be in flight when active attempts are.
func limit(active int64, share float64) int64 {
	return max(minRetryConcurrency, int64(share*float64(active)))
}

// allows reports whether take would succeed, spending nothing. own: the
// request's attempt in progress is a retry, whose place the next one takes.
func (b *budget) allows(active int64, share float64, own bool) bool {
	r := b.retrying.Load()
	if own {
		r--
	}
	return r < limit(active, share)
}

// take starts a retry if the budget allows it, and reports whether it did.
// own: the request's attempt in progress is a retry; the new one takes its
// place in the count (which the caller then must not release).
func (b *budget) take(active int64, share float64, own bool) bool {
	for {
		r := b.retrying.Load()
		if own {
			return r-1 < limit(active, share)
		}
		if r >= limit(active, share) {
			return false
		}
		if b.retrying.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// release ends a retry.
func (b *budget) release() { b.retrying.Add(-1) }
