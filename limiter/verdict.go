package limiter

import "time"

// Reason says which guard blocked a call. Its String is the value of the
// X-Sluice-Blocked header and of the metrics' reason label.
type Reason uint8

const (
	ReasonNone Reason = iota
	ReasonFlow
	ReasonParam
	ReasonDegrade
	ReasonSystem
	// ReasonAuthority: an authority rule (Sentinel AuthorityRule) refused
	// the caller; the gateway answers 403, not the block status.
	ReasonAuthority
	// ReasonDryRun marks a would-be block of a dryRun rule; the call passes.
	ReasonDryRun
)

var reasonNames = [...]string{"", "flow", "param", "degrade", "system", "authority", "dryrun"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Quota describes the qps rule a call was counted against, for the RateLimit
// headers (draft-ietf-httpapi-ratelimit-headers): policy q=Limit;w=Window and
// r=Remaining;t=Reset.
type Quota struct {
	Policy string // policy name: the rule's resource
	// Kind (ReasonFlow or ReasonParam) and Rule name the rule: its place
	// among its resource's flow rules, or param rules, in file order from
	// 0. The caller names each policy from them (the resource, plus a
	// suffix where one resource has several).
	Kind Reason
	Rule int
	// Key is, for a param rule, the value the call was counted under. It
	// may alias a buffer its source reuses: it is valid only during the
	// QuotaSink call that hands the Quota over.
	Key       string
	Limit     float64       // whole calls per Window for reject rules (a count under 1 stretches Window), else the count
	Window    time.Duration // statIntervalMs (for a reject count under 1, the whole intervals that hold one call)
	Remaining float64       // passes left in the current window after this call
	Reset     time.Duration // until at least one more pass is allowed (a calendar quota: until its reset)
}

// Verdict is the outcome of one guard's check. The zero Verdict passes at once.
type Verdict struct {
	Blocked bool
	Reason  Reason
	// Wait is how long a passed call must wait before it is forwarded
	// (throttle behaviours' virtual queue); 0 means go now.
	Wait time.Duration
	// Prioritized: Wait includes a prioritized call's wait for a pass
	// reserved ahead (Checker.EnterPrioritized).
	Prioritized bool
	// RetryAfter is, for a blocked call, when a retry may pass (0: unknown).
	RetryAfter time.Duration
	// Quota is set when a qps rule counted the call (HasQuota).
	Quota    Quota
	HasQuota bool
	// DryRun counts dryRun rules that would have blocked this call.
	DryRun int
}

// QuotaSink receives the Quota of every rule that counts a call (Checker's
// EnterQuotas, hotparam's Checker.EnterQuotas), in the order the rules are
// checked, the blocking rule's last; the RateLimit headers list them all.
// q.Key is valid only during the call (q is passed by value, so that
// handing it over allocates nothing). Implementations should not allocate.
type QuotaSink interface {
	Quota(q Quota)
}
