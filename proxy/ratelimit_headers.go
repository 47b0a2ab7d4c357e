package proxy

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"sluice/limiter"
)

// rateLimitHeaders are one snapshot's RateLimit and RateLimit-Policy
// values, shared by every response that reports the same quota: the
// policy's one value per quota, the RateLimit value once per (remaining,
// seconds to reset) pair, each formatted the first time a response needs
// it. After that a response sets both fields without formatting and
// without allocating. A quota past maxQuotas (a cluster rule's share
// changing without end) or a pair past the table is formatted as before.
type rateLimitHeaders struct {
	m  atomic.Pointer[map[quotaKey]*quotaValues] // replaced whole, under mu
	mu sync.Mutex
}

// quotaKey is what the policy value and the table depend on.
type quotaKey struct {
	policy string
	limit  float64
	window time.Duration
}

// quotaValues are one quota's shared values. ratelimit[r*resets+t] is
// the RateLimit value for r remaining and t seconds to reset.
type quotaValues struct {
	policy    []string
	limit     []string // X-RateLimit-Limit: the whole quota, as q states it
	resets    int64
	ratelimit []atomic.Pointer[[]string]
}

// oneValue is a header value and its backing in one allocation: the
// string points into buf, which it keeps alive, and nothing writes buf
// after.
type oneValue struct {
	v   [1]string
	buf [80]byte
}

const (
	maxQuotas      = 256
	maxQuotaValues = 4096 // per quota: 32 KiB of pointers
)

// set writes the RateLimit fields for q into h (see setRateLimit), and
// with legacy the X-RateLimit-* fields for it too.
func (c *rateLimitHeaders) set(h http.Header, q *limiter.Quota, legacy bool) {
	v := c.values(q)
	if legacy {
		setLegacy(h, v, q)
	}
	if v == nil {
		setRateLimit(h, q)
		return
	}
	r, t := int64(max(q.Remaining, 0)), ceilSeconds(q.Reset)
	if t < 0 || t >= v.resets || r*v.resets+t >= int64(len(v.ratelimit)) {
		// Past the table (a large limit): the shared policy, and the
		// RateLimit value formatted into one allocation with its []string.
		one := new(oneValue)
		b := appendSfString(one.buf[:0], q.Policy)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, r, 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, t, 10)
		if len(b) > len(one.buf) { // a long policy name: b moved out of buf
			setRateLimit(h, q)
			return
		}
		one.v[0] = unsafe.String(&one.buf[0], len(b))
		h["Ratelimit-Policy"] = v.policy
		h["Ratelimit"] = one.v[:]
		return
	}
	cell := &v.ratelimit[r*v.resets+t]
	p := cell.Load()
	if p == nil {
		b := appendSfString(make([]byte, 0, len(q.Policy)+24), q.Policy)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, r, 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, t, 10)
		p = &[]string{string(b)}
		cell.Store(p) // two first responses may both format it: either is right
	}
	h["Ratelimit-Policy"] = v.policy
	h["Ratelimit"] = *p
}

// values returns q's shared values, adding them on first use (nil: too
// many quotas).
func (c *rateLimitHeaders) values(q *limiter.Quota) *quotaValues {
	k := quotaKey{q.Policy, q.Limit, q.Window}
	if m := c.m.Load(); m != nil {
		if v := (*m)[k]; v != nil {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v := (*old)[k]; v != nil {
			return v
		}
		if len(*old) >= maxQuotas {
			return nil
		}
	}
	limit, window := wholeQuota(q.Limit, q.Window)
	b := appendSfString(nil, q.Policy)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, limit, 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, ceilSeconds(window), 10)
	// Seconds to reset run up to the window; remaining up to the limit.
	resets := min(ceilSeconds(q.Window), 64) + 1
	cells := min((int64(max(q.Limit, 0))+1)*resets, maxQuotaValues)
	v := &quotaValues{policy: []string{string(b)}, limit: intValue(limit), resets: resets, ratelimit: make([]atomic.Pointer[[]string], cells)}
	m := make(map[quotaKey]*quotaValues, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = v
	c.m.Store(&m)
	return v
}

// setLegacy writes the X-RateLimit-Limit, -Remaining and -Reset fields
// that most clients still read (GitHub's, Twitter's), for the quota the
// RateLimit field names: q, r and t (seconds) of the draft's fields. v is
// q's shared values, nil past the table.
// legacyLimit is the first of the legacy fields setLegacy writes.
const legacyLimit = "X-Ratelimit-Limit"

// legacyField reports whether name (as the upstream wrote it) is one of
// the legacy fields. Where the gateway writes them, an upstream's own go:
// each holds one number, and a client that met two ("1000, 999") could
// read neither; RateLimit and RateLimit-Policy are lists, whose items
// from both stand side by side.
func legacyField(name []byte) bool {
	const prefix = "x-ratelimit-"
	if len(name) < len(prefix) || !equalFoldASCII(string(name[:len(prefix)]), prefix) {
		return false
	}
	switch rest := string(name[len(prefix):]); {
	case equalFoldASCII(rest, "limit"), equalFoldASCII(rest, "remaining"), equalFoldASCII(rest, "reset"):
		return true
	}
	return false
}

// dropLegacy removes the legacy fields from an upstream's answer h when the
// gateway wrote its own (held: the fields it set before forwarding).
func dropLegacy(h, held http.Header) {
	if _, ours := held[legacyLimit]; ours {
		delete(h, legacyLimit)
		delete(h, "X-Ratelimit-Remaining")
		delete(h, "X-Ratelimit-Reset")
	}
}

func setLegacy(h http.Header, v *quotaValues, q *limiter.Quota) {
	if v != nil {
		h["X-Ratelimit-Limit"] = v.limit
	} else {
		limit, _ := wholeQuota(q.Limit, q.Window)
		h["X-Ratelimit-Limit"] = intValue(limit)
	}
	h["X-Ratelimit-Remaining"] = intValue(int64(max(q.Remaining, 0)))
	h["X-Ratelimit-Reset"] = intValue(ceilSeconds(q.Reset))
}

// maxSharedInt bounds smallInts.
const maxSharedInt = 1024

// smallInts are the header values "0" to "1024", shared by every response
// (read only), so that a small count or time costs no allocation.
var smallInts = func() (t [maxSharedInt + 1][1]string) {
	for i := range t {
		t[i][0] = strconv.Itoa(i)
	}
	return t
}()

// intValue is n as a header value: shared for 0..maxSharedInt, else one
// allocation.
func intValue(n int64) []string {
	if n >= 0 && n <= maxSharedInt {
		return smallInts[n][:]
	}
	return []string{strconv.FormatInt(n, 10)}
}
