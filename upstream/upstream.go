package upstream

import (
	"math"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Outcome is what an attempt says about its target.
type Outcome uint8

const (
	// Success: the target answered (any status but 502, 503 and 504).
	Success Outcome = iota
	// Failure: a connect error, timeout or reset, or a 502/503/504 answer.
	// Failures in a row eject a target (Spec.Passive).
	Failure
	// Abandoned: the client left, or sent a broken body; it says nothing
	// about the target.
	Abandoned
)

// FailureStatus reports the statuses that count as a target's failure.
func FailureStatus(code int) bool { return code == 502 || code == 503 || code == 504 }

// state is one target's live state. It is shared by every snapshot whose
// upstream of the same name lists the same URL, so health, ejections and
// counts survive a reload.
type state struct {
	upstream, url string
	u             *url.URL

	inFlight     atomic.Int64
	down         atomic.Bool  // active checks say down
	ejectedUntil atomic.Int64 // unavailable while now < ejectedUntil

	mu      sync.Mutex // guards the fields below
	health  health
	passive passive
	stats   counts // cRequests, cErrors, cRetries over the last second
}

const statsWidth = int64(100 * time.Millisecond)

func newState(upstream, raw string, u *url.URL) *state {
	s := &state{upstream: upstream, url: raw, u: u, stats: newCounts(statsWidth)}
	s.ejectedUntil.Store(math.MinInt64)
	return s
}

// forgetEjections ends the target's ejection and its backoff.
func (s *state) forgetEjections() {
	s.mu.Lock()
	s.passive = passive{}
	s.mu.Unlock()
	s.ejectedUntil.Store(math.MinInt64)
}

func (s *state) available(now int64) bool {
	return !s.down.Load() && now >= s.ejectedUntil.Load()
}

// shared is the live state of an upstream, by name, shared like state.
type shared struct {
	budget    budget
	ejectMu   sync.Mutex // one ejection decision at a time (maxEjectedPercent)
	panicking atomic.Bool

	mu    sync.Mutex // guards rates
	rates counts     // cRequests (client requests), cRetries over the last 10 s, for Status
}

func newShared() *shared { return &shared{rates: newCounts(ratesWidth)} }

// ratesWidth: an upstream's requests and retries are shown over ten 1 s
// buckets.
const ratesWidth = int64(time.Second)

func (sh *shared) count(now int64, k int) {
	sh.mu.Lock()
	sh.rates.add(now, k, 1)
	sh.mu.Unlock()
}

// member is a target as one snapshot's upstream uses it.
type member struct {
	st     *state
	weight int64
	obs    TargetObserver
	u      *url.URL // as this snapshot writes it: where requests go
}

// Upstream is one upstream of one snapshot: its targets, how it balances
// and retries. Build it with Pool.Build. It is immutable except for its
// live state and safe for concurrent use.
//
// A request keeps its Tries: it calls Pick once, Retry when an attempt
// failed (which settles it when it makes another), and Done once at the
// end, for the attempt in progress. Every method takes now, ns on the
// Pool's clock; none reads the clock.
type Upstream struct {
	name    string
	members []*member
	balance Balance
	rr      smooth
	hash    *rendezvous // Hash only
	passive *Passive
	hc      *HealthCheck
	retries int
	share   float64
	sh      *shared
	obs     UpstreamObserver
	log     zerolog.Logger
}

// Name is the upstream's name.
func (u *Upstream) Name() string { return u.name }

// Len is the number of targets.
func (u *Upstream) Len() int { return len(u.members) }

// URL returns target i's URL.
func (u *Upstream) URL(i int) *url.URL { return u.members[i].u }

// Retries is how many times a request may be sent again.
func (u *Upstream) Retries() int { return u.retries }

// Pick chooses the target of a request's first attempt and makes it the
// attempt in progress of t (which must be zero). key is the request's
// hashed hashOn value (HashKey); hasKey false serves a Hash upstream round
// robin. When no target is available every target is a candidate (panic
// mode: a wrong health check must not take a service down); that is logged
// when it starts and ends, and counted per request.
func (u *Upstream) Pick(now int64, key uint64, hasKey bool, t *Tries) int {
	if u.retries > 0 {
		u.sh.count(now, cRequests)
	}
	var cand Set
	if !u.candidates(now, &t.tried, &cand) {
		u.panicMode()
	} else if u.sh.panicking.Load() && u.sh.panicking.CompareAndSwap(true, false) {
		u.log.Info().Str("upstream", u.name).Msg("upstream out of panic mode: a target is available again")
	}
	i := u.choose(&cand, key, hasKey)
	u.begin(i, t, false)
	return i
}

// Retry is called when t's attempt in progress failed (code: the target's
// status, 0 for none). While fewer than Retries retries were made and the
// retry budget allows one, it settles the failed attempt (as Done with
// Failure) and chooses the target of the next, which becomes the attempt
// in progress: an available target t has not tried while there is one,
// else one it tried, going round them (another than the one that just
// failed, while there is one); when no target is available at all, the
// same among all targets. It returns -1 when the request must not be sent
// again, and leaves the failed attempt in progress, for Done.
func (u *Upstream) Retry(now int64, key uint64, hasKey bool, t *Tries, code int) int {
	if t.cur == 0 {
		return -1
	}
	if t.sent > u.retries || !u.sh.budget.take(u.active(), u.share, t.retry) {
		return -1
	}
	// The new attempt takes the place in the budget of a failed retry.
	last := t.cur - 1
	u.done(now, last, code, Failure)
	// That failure may have ejected its target: choose among the targets
	// as they are now, so that a retry does not go back to the target it
	// just ejected while another may be tried.
	var cand Set
	_, round := u.retryCandidates(now, t, &cand)
	t.cur = 0
	if round {
		t.tried = Set{}
		t.tried.Add(last)
	}
	i := u.choose(&cand, key, hasKey)
	u.begin(i, t, true)
	u.sh.count(now, cRetries)
	u.obs.Retried()
	st := u.members[i].st
	st.mu.Lock()
	st.stats.add(now, cRetries, 1)
	st.mu.Unlock()
	return i
}

// MayRetry reports whether Retry would find a target now, spending nothing
// (a forwarder that must decide before an answer arrives whether it would
// retry it).
func (u *Upstream) MayRetry(now int64, t *Tries) bool {
	if t.cur == 0 {
		return false
	}
	var cand Set
	ok, _ := u.retryCandidates(now, t, &cand)
	return ok && u.sh.budget.allows(u.active(), u.share, t.retry)
}

// Done settles t's attempt in progress, if any: code is the target's
// status, or 0 when there was none. Failures in a row eject the target
// (Spec.Passive), within maxEjectedPercent.
func (u *Upstream) Done(now int64, t *Tries, code int, o Outcome) {
	if t.cur == 0 {
		return
	}
	if t.retry {
		u.sh.budget.release()
		t.retry = false
	}
	u.done(now, t.cur-1, code, o)
	t.cur = 0
}

func (u *Upstream) done(now int64, i int, code int, o Outcome) {
	m := u.members[i]
	st := m.st
	st.inFlight.Add(-1)
	answered := code != 0 || o != Abandoned
	if answered {
		m.obs.Answered(code)
	}
	due := false
	st.mu.Lock()
	if answered {
		// An attempt the target answered counts, as in the metrics, even
		// when its client left while the answer streamed.
		st.stats.add(now, cRequests, 1)
	}
	if o == Failure {
		st.stats.add(now, cErrors, 1)
	}
	if u.passive != nil {
		switch o {
		case Failure:
			due = st.passive.failed(now, u.passive)
		case Success:
			st.passive.succeeded(now)
		}
	}
	st.mu.Unlock()
	if due {
		u.eject(now, i)
	}
}

// active is the number of attempts in flight to the upstream's targets,
// retries included: what the retry budget is a share of.
func (u *Upstream) active() int64 {
	n := int64(0)
	for _, m := range u.members {
		n += m.st.inFlight.Load()
	}
	return n
}

func (u *Upstream) begin(i int, t *Tries, retry bool) {
	t.tried.Add(i)
	t.sent++
	t.cur, t.retry = i+1, retry
	u.members[i].st.inFlight.Add(1)
}

// candidates puts the available targets not in tried in cand and reports
// whether there are any; if not, cand holds every target not in tried.
func (u *Upstream) candidates(now int64, tried, cand *Set) bool {
	ok := false
	for i, m := range u.members {
		if !tried.Has(i) && m.st.available(now) {
			cand.Add(i)
			ok = true
		}
	}
	if !ok {
		for i := range u.members {
			if !tried.Has(i) {
				cand.Add(i)
			}
		}
	}
	return ok
}

// retryCandidates puts the targets a retry of t may go to in cand, and
// reports whether it may be made (fewer than Retries retries so far) and
// whether it starts a new round. The candidates are the available targets
// not tried in this round; when no target is available (panic mode), the
// targets not tried in this round. When there are none, every target the
// request may go to was tried: a new round starts, in which the target
// that just failed counts as tried, so that the retries go round the
// targets rather than back to it (unless it is the only one available).
func (u *Upstream) retryCandidates(now int64, t *Tries, cand *Set) (ok, round bool) {
	if t.sent > u.retries {
		return false, false
	}
	if u.candidates(now, &t.tried, cand) {
		return true, false
	}
	avail := false
	for _, m := range u.members {
		if m.st.available(now) {
			avail = true
			break
		}
	}
	if !avail && !cand.Empty() {
		return true, false
	}
	var last Set
	last.Add(t.cur - 1)
	*cand = Set{}
	if u.candidates(now, &last, cand) != avail || cand.Empty() {
		// The target that just failed is the only available one (or the
		// only one at all).
		*cand = last
	}
	return true, true
}

func (u *Upstream) choose(cand *Set, key uint64, hasKey bool) int {
	if len(u.members) == 1 {
		return 0
	}
	switch {
	case u.balance == LeastRequest:
		return leastRequest(u.members, cand)
	case u.balance == Hash && hasKey:
		return u.hash.pick(key, cand)
	}
	return u.rr.pick(u.members, cand)
}

func (u *Upstream) panicMode() {
	u.obs.Panicked()
	if !u.sh.panicking.Load() && u.sh.panicking.CompareAndSwap(false, true) {
		u.log.Warn().Str("upstream", u.name).Int("targets", len(u.members)).
			Msg("upstream in panic mode: no target is available, so every target gets traffic")
	}
}

// eject ejects target i unless that would eject more than
// maxEjectedPercent of the targets; its failures stay counted, so the next
// failure tries again.
func (u *Upstream) eject(now int64, i int) {
	u.sh.ejectMu.Lock()
	defer u.sh.ejectMu.Unlock()
	st := u.members[i].st
	if now < st.ejectedUntil.Load() {
		return
	}
	ejected := 0
	for _, m := range u.members {
		if now < m.st.ejectedUntil.Load() {
			ejected++
		}
	}
	if (ejected+1)*100 > u.passive.MaxEjectedPercent*len(u.members) {
		if e := u.log.Debug(); e.Enabled() {
			e.Str("upstream", u.name).Str("target", st.url).Int("ejected", ejected).
				Msg("upstream target not ejected: maxEjectedPercent reached")
		}
		return
	}
	st.mu.Lock()
	until := st.passive.eject(now, u.passive)
	st.mu.Unlock()
	st.ejectedUntil.Store(until)
	u.members[i].obs.Ejected()
	u.log.Warn().Str("upstream", u.name).Str("target", st.url).Dur("for", time.Duration(until-now)).
		Msg("upstream target ejected after failures in a row")
}
