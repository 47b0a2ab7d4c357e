package upstream

// Tries is one request's attempts: the targets it was sent to, how many
// times it was sent, and the attempt in progress. Its caller keeps it from
// Pick to the last Done; the zero value is a request not yet sent. It
// allocates nothing.
type Tries struct {
	tried Set  // the targets tried in this round (see Upstream.Retry)
	sent  int  // attempts made, the first included
	cur   int  // the target of the attempt in progress, plus one; 0: none
	retry bool // the attempt in progress is a retry (it holds a place in the budget)
}

// Current is the target of the attempt in progress, or -1 when there is
// none (not sent yet, or settled by Done).
func (t *Tries) Current() int { return t.cur - 1 }

// Sent is how many attempts the request made, the first included.
func (t *Tries) Sent() int { return t.sent }

// Tried reports whether target i was sent an attempt in this round: once
// every target it may go to was tried, retries start another round.
func (t *Tries) Tried(i int) bool { return t.tried.Has(i) }
