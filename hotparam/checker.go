package hotparam

import (
	"time"

	"sluice/config"
	"sluice/limiter"
)

// Values gives a request's value for a source; ok=false when the request
// lacks it (the rule then does not apply). The returned string may alias a
// buffer the caller reuses: hotparam copies it (or, past 64 bytes, its
// prefix and a digest) before keeping it.
type Values interface {
	Value(src config.Source) (string, bool)
}

// Checker checks the param rules of one resource, in file order. A nil
// *Checker (a resource without param rules) passes every call. It is safe for
// concurrent use; its per-value state may be shared with the Checkers of
// later snapshots (rules unchanged by a reload).
type Checker struct {
	rules []*rule
}

// Enter checks every rule of the checker against the call's values at now,
// for n tokens (n < 1 counts as 1; concurrency rules count the call once,
// whatever n). Looking up
// a value already tracked does not allocate.
//
// If the call passes, the returned Token must be ended exactly once with Exit
// or Cancel; Verdict.Wait > 0 when a throttle rule queued the call (the caller
// waits that long before forwarding, or Cancels if the client goes away). If
// a rule blocks, the verdict has Blocked, Reason limiter.ReasonParam and, when
// known, RetryAfter; what earlier rules took for the call is given back and
// the Token is zero. A dryRun rule that would block is counted in
// Verdict.DryRun and the call goes on; dryRun rules never delay a call.
// Verdict.Quota describes the qps-reject rule with the fewest tokens left.
func (c *Checker) Enter(now int64, v Values, n int64) (Token, limiter.Verdict) {
	var t Token
	var vd limiter.Verdict
	if c == nil {
		return t, vd
	}
	if n < 1 {
		n = 1
	}
	for _, r := range c.rules {
		val, ok := v.Value(r.src)
		if !ok {
			continue
		}
		// Entered with the value's shard locked, so that enters of one
		// value are serialised (the CAS loops only race Exit and Cancel)
		// and the value cannot be evicted between lookup and enter.
		e, sh := r.table.Get(val, now)
		var o outcome
		if e == nil {
			// Every tracked value is in flight or queued: the rule cannot
			// track one more without passing its cap, so it fails closed.
			o = outcome{blocked: true}
		} else {
			o = r.enter(&e.V, now, n)
		}
		sh.Unlock()
		if o.took {
			t.add(slot{r: r, e: e, undo: o.undo, sched: o.sched})
		}
		if o.blocked {
			if r.dryRun {
				vd.DryRun++
				continue
			}
			t.Cancel(now)
			vd = limiter.Verdict{
				Blocked:    true,
				Reason:     limiter.ReasonParam,
				RetryAfter: time.Duration(o.retry),
				DryRun:     vd.DryRun,
			}
			if o.p != nil {
				vd.Quota, vd.HasQuota = r.quota(&o), true
			}
			return Token{}, vd
		}
		if r.dryRun {
			continue
		}
		if w := time.Duration(o.wait); w > vd.Wait {
			vd.Wait = w
		}
		if o.p != nil && (!vd.HasQuota || o.remaining < vd.Quota.Remaining) {
			vd.Quota, vd.HasQuota = r.quota(&o), true
		}
	}
	return t, vd
}
