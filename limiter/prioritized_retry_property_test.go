package limiter_test

import (
	"fmt"
	"testing"
	"time"

	"sluice/limiter"
)

// A prioritized call refused (no room within its maxWait, behind passes
// others reserved ahead) is told when it would pass at once: its RetryAfter,
// and its quota's Reset, which become Retry-After and RateLimit's t. Retried
// that long after, it passes without waiting; a nanosecond sooner, a call
// that may not wait is refused. The last call that passed, with nothing
// left, is told the same of the next call, measured from when it goes (a
// waiting call is answered then). Swept over counts (1 to 1000, 100 under
// the race detector), intervals, maxWaits, the spacing of the calls
// queueing ahead and start phases.
//
// Before, the refused call said 0 (no Retry-After, t=0) whenever its room
// lay over one interval ahead, and a waiting pass's t was its own wait.
func TestPrioritizedRetryIsExact(t *testing.T) {
	for _, count := range []float64{1, 2, 3, 10, 100, 1000} {
		for _, ivMs := range []int64{500, 1000, 2500} {
			for _, waitMs := range []int64{100, 700, 1500, 3000} {
				for _, gap := range []int64{0, 10 * ms, 150 * ms} {
					if float64(gap)*count >= float64(ivMs*ms) || count > prioMaxCount {
						continue // within the limit: none refused
					}
					name := fmt.Sprintf("count=%g/iv=%dms/maxWait=%dms/gap=%dms", count, ivMs, waitMs, gap/ms)
					for ph := int64(0); ph < sec; ph += 97 * ms {
						checkPrioritizedRetry(t, name, count, ivMs, waitMs*ms, gap, t0-t0%sec+ph)
					}
				}
			}
		}
	}
}

// prioSequence sends prioritized calls gap apart from start until one is
// refused, or only the first calls; it returns the calls' instants and
// verdicts, the refused one last.
func prioSequence(c *limiter.Checker, start, gap, maxWait int64, calls int) (at []int64, vs []limiter.Verdict) {
	for i := 0; i < calls; i++ {
		now := start + int64(i)*gap
		tok, v := c.EnterPrioritized(now, "", 1, maxWait)
		at, vs = append(at, now), append(vs, v)
		if v.Blocked {
			break
		}
		tok.Exit(now+int64(v.Wait), false)
	}
	return at, vs
}

func checkPrioritizedRetry(t *testing.T, name string, count float64, ivMs, maxWait, gap, start int64) {
	t.Helper()
	fresh := func() *limiter.Checker {
		r := qps("r", count)
		r.StatIntervalMs = ivMs
		return compile(t, r).Checker("r", "default")
	}
	where := fmt.Sprintf("%s/phase=%dms", name, (start%sec)/ms)
	c := fresh()
	at, vs := prioSequence(c, start, gap, maxWait, 10000)
	last := len(vs) - 1
	refused := vs[last]
	if !refused.Blocked {
		t.Fatalf("%s: no call of %d refused", where, len(vs))
	}
	if refused.RetryAfter <= 0 || !refused.HasQuota || refused.Quota.Reset != refused.RetryAfter || refused.Quota.Remaining != 0 {
		t.Fatalf("%s: refused call %d at +%v: %+v, want RetryAfter > 0 and the quota's Reset equal to it",
			where, last, time.Duration(at[last]-start), refused)
	}
	retry := at[last] + int64(refused.RetryAfter)
	if _, v := c.EnterPrioritized(retry-1, "", 1, 0); !v.Blocked {
		t.Fatalf("%s: a call that may not wait passed 1 ns before RetryAfter %v", where, refused.RetryAfter)
	}
	if _, v := c.EnterPrioritized(retry, "", 1, maxWait); v.Blocked || v.Wait != 0 {
		t.Fatalf("%s: retried at RetryAfter %v: %+v, want a pass at once", where, refused.RetryAfter, v)
	}

	// The last pass, replayed on a fresh checker: if it left nothing, its
	// Reset says when, from its going, the next call passes at once.
	pass := vs[last-1]
	if last == 0 || pass.Quota.Remaining != 0 {
		return
	}
	c = fresh()
	prioSequence(c, start, gap, maxWait, last)
	next := at[last-1] + int64(pass.Wait) + int64(pass.Quota.Reset)
	if _, v := c.EnterPrioritized(next, "", 1, maxWait); v.Blocked || v.Wait != 0 {
		t.Fatalf("%s: call %d (%+v) left nothing; the next call at its Reset %v after it went: %+v, want a pass at once",
			where, last-1, pass, pass.Quota.Reset, v)
	}
}
