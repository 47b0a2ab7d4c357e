package proxy

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"
	"unsafe"

	"sluice/config"
	"sluice/limiter"
)

// policyNames are one resource's RateLimit policy names, by the rule's
// place among the resource's flow rules and param rules (limiter.Quota's
// Rule): the resource itself when it has one rule with a quota, else the
// resource plus "#flow<n>" or "#param<n>", n counting that kind of the
// resource's rules from 1 in file order (SPEC §4).
type policyNames struct {
	resource    string
	flow, param []string
}

// name is the policy name of q.
func (p *policyNames) name(q *limiter.Quota) string {
	if p == nil {
		return q.Policy
	}
	list := p.flow
	if q.Kind == limiter.ReasonParam {
		list = p.param
	}
	if q.Rule < len(list) {
		return list[q.Rule]
	}
	return q.Policy
}

// quotaRule reports the rules that state a quota: qps flow rules other
// than relate ones, and qps param rules that reject (a throttle queue or
// a concurrency count has none).
func quotaFlowRule(r *config.FlowRule) bool {
	return r.Grade != config.GradeConcurrency && r.Strategy != config.StrategyRelate
}

func quotaParamRule(r *config.ParamRule) bool {
	return r.Grade != config.GradeConcurrency && r.ControlBehavior != config.BehaviorThrottle
}

// buildPolicyNames names every resource's policies, once per snapshot.
func buildPolicyNames(cfg *config.Config) map[string]*policyNames {
	out := map[string]*policyNames{}
	get := func(res string) *policyNames {
		p := out[res]
		if p == nil {
			p = &policyNames{resource: res}
			out[res] = p
		}
		return p
	}
	quotas := map[string]int{}
	for i := range cfg.FlowRules {
		r := &cfg.FlowRules[i]
		p := get(r.Resource)
		p.flow = append(p.flow, r.Resource)
		if quotaFlowRule(r) {
			quotas[r.Resource]++
		}
	}
	for i := range cfg.ParamRules {
		r := &cfg.ParamRules[i]
		p := get(r.Resource)
		p.param = append(p.param, r.Resource)
		if quotaParamRule(r) {
			quotas[r.Resource]++
		}
	}
	for res, p := range out {
		if quotas[res] <= 1 {
			continue
		}
		for i := range p.flow {
			p.flow[i] = res + "#flow" + strconv.Itoa(i+1)
		}
		for i := range p.param {
			p.param[i] = res + "#param" + strconv.Itoa(i+1)
		}
	}
	return out
}

// maxCallQuotas bounds the policies one response lists; a call counted
// by more quotas lists the first ones (and still names the nearest).
const maxCallQuotas = 8

// callQuota is one quota that counted a call, named, and for a param rule
// with the partition key of its value.
type callQuota struct {
	q     limiter.Quota // Key cleared: the value is not kept
	pk    [pkLen]byte   // base64 of the value's keyed hash
	hasPK bool
}

// pkLen is the partition key's length: 12 bytes of hash, 16 in base64.
const (
	pkBytes = 12
	pkLen   = 16
)

// quotas is what a call's guards report for the RateLimit fields (it is
// the guards' limiter.QuotaSink); it lives in the pooled exchange.
type quotas struct {
	list  [maxCallQuotas]callQuota
	n     int
	names *policyNames            // the route's resource's
	all   map[string]*policyNames // every resource's (API groups)
	key   *[32]byte               // the gateway's partition key secret
}

var _ limiter.QuotaSink = (*quotas)(nil)

// Quota keeps q, named, with its value hashed into a partition key at
// once (the value aliases a buffer that the next source read reuses).
func (qs *quotas) Quota(q limiter.Quota) {
	i := qs.n
	if i == maxCallQuotas {
		// Full: the nearest to blocking still takes the last place.
		if q.Remaining >= qs.list[i-1].q.Remaining {
			return
		}
		i--
	} else {
		qs.n++
	}
	q.Policy = qs.policyOf(&q)
	cq := &qs.list[i]
	cq.hasPK = q.Key != ""
	if cq.hasPK {
		partitionKey(&cq.pk, qs.key, q.Key)
		q.Key = ""
	}
	cq.q = q
}

// policyOf is the RateLimit policy name of q, a quota of the resource
// q.Policy: the route's, or an API group's.
func (qs *quotas) policyOf(q *limiter.Quota) string {
	names := qs.names
	if names == nil || q.Policy != names.resource {
		names = qs.all[q.Policy]
	}
	return names.name(q)
}

// spentQuotas is the sink hotparam.Token.Spent hands the quotas an
// answer's figures lowered to: each lowers the quotas of its rule the call
// met (a rule's quota is known by its policy name, which names the rule),
// never raises one. lowered: one was.
type spentQuotas struct {
	qs      *quotas
	lowered bool
}

func (s *spentQuotas) Quota(q limiter.Quota) {
	qs := s.qs
	q.Policy = qs.policyOf(&q)
	for i := range qs.n {
		cq := &qs.list[i].q
		if cq.Policy != q.Policy || cq.Kind != q.Kind || cq.Rule != q.Rule || q.Remaining >= cq.Remaining {
			continue
		}
		cq.Remaining, s.lowered = q.Remaining, true
		if q.Remaining < 1 {
			cq.Reset = max(cq.Reset, q.Reset)
		}
	}
}

// blockedFor makes the blocking quota (reported last) free no sooner than
// retry, when the call was refused for that long.
func (qs *quotas) blockedFor(retry time.Duration) {
	if qs.n > 0 {
		q := &qs.list[qs.n-1].q
		q.Reset = max(q.Reset, retry)
	}
}

// partitionKey writes pk: base64 of the first 12 bytes of
// SHA-256(key || value), a hash of the value as a byte sequence that
// cannot be turned back into the value (an address, an API key) without
// the gateway's secret key. Short values are hashed from a stack buffer.
func partitionKey(pk *[pkLen]byte, key *[32]byte, value string) {
	var buf [160]byte
	b := append(buf[:0], key[:]...)
	b = append(b, value...)
	sum := sha256.Sum256(b)
	base64.StdEncoding.Encode(pk[:], sum[:pkBytes])
}

// nearest is the quota nearest to blocking: the fewest remaining, then
// the longest until it frees.
func (qs *quotas) nearest() *callQuota {
	best := &qs.list[0]
	for i := 1; i < qs.n; i++ {
		c := &qs.list[i]
		if c.q.Remaining < best.q.Remaining || (c.q.Remaining == best.q.Remaining && c.q.Reset > best.q.Reset) {
			best = c
		}
	}
	return best
}

// twoValues are the RateLimit-Policy and RateLimit values of a response
// that lists several policies or a partition key, with their bytes, in
// one allocation of the smallest of three sizes (128, 256 and 512 bytes
// with v) that holds them: the two fields of a flow and a param rule with
// its pk take about 120 bytes, and a 512-byte block for every response
// was most of the gateway's garbage per request.
type twoValues[B [96]byte | [224]byte | [480]byte] struct {
	v   [2]string
	buf B
}

// maxTwoValues is the largest room newTwoValues gives.
const maxTwoValues = 480

// newTwoValues returns the two values' room and at least n bytes (n at
// most maxTwoValues) in one allocation.
func newTwoValues(n int) (*[2]string, []byte) {
	switch {
	case n <= 96:
		t := new(twoValues[[96]byte])
		return &t.v, t.buf[:]
	case n <= 224:
		t := new(twoValues[[224]byte])
		return &t.v, t.buf[:]
	}
	t := new(twoValues[[480]byte])
	return &t.v, t.buf[:]
}

// set writes the RateLimit fields for the quotas of a call (blocked: the
// blocker's quota, reported last, is the one RateLimit names), and with
// legacy the X-RateLimit-* fields for that same policy. One quota without
// a partition key shares the snapshot's values (no allocation); several,
// or a param rule's, cost one allocation while they fit in 480 bytes.
func (qs *quotas) set(h http.Header, c *rateLimitHeaders, legacy, blocked bool) {
	if qs.n == 0 {
		return
	}
	near := qs.nearest()
	if blocked {
		near = &qs.list[qs.n-1]
	}
	if qs.n == 1 && !near.hasPK {
		c.set(h, &near.q, legacy)
		return
	}
	// Formatted on the stack, then copied into a block of its size.
	var tmp [maxTwoValues]byte
	b := tmp[:0]
	for i := range qs.n {
		cq := &qs.list[i]
		if i > 0 {
			b = append(b, ", "...)
		}
		if v := c.values(&cq.q); v != nil {
			b = append(b, v.policy[0]...)
		} else {
			b = appendPolicy(b, &cq.q)
		}
		b = appendPK(b, cq)
	}
	split := len(b)
	b = appendSfString(b, near.q.Policy)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, int64(max(near.q.Remaining, 0)), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, ceilSeconds(near.q.Reset), 10)
	b = appendPK(b, near)
	var (
		tv *[2]string
		s  string
	)
	if len(b) <= maxTwoValues {
		var buf []byte
		tv, buf = newTwoValues(len(b))
		s = unsafe.String(&buf[0], copy(buf, b))
	} else { // b moved out of tmp
		tv, s = new([2]string), string(b)
	}
	tv[0], tv[1] = s[:split], s[split:]
	h["Ratelimit-Policy"] = tv[0:1:1]
	h["Ratelimit"] = tv[1:2:2]
	if legacy {
		setLegacy(h, c.values(&near.q), &near.q)
	}
}

// PartitionKey is the pk a param rule's RateLimit-Policy item carries for
// value (without the colons): the admin API lists it beside a value it
// does not show (a credential's), so that an operator can find the value
// a client's answer names.
func (g *Gateway) PartitionKey(value string) string {
	var pk [pkLen]byte
	partitionKey(&pk, &g.pkKey, value)
	return string(pk[:])
}

// appendPolicy appends q's RateLimit-Policy item without its partition key.
func appendPolicy(b []byte, q *limiter.Quota) []byte {
	limit, window := wholeQuota(q.Limit, q.Window)
	b = appendSfString(b, q.Policy)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, limit, 10)
	b = append(b, ";w="...)
	return strconv.AppendInt(b, ceilSeconds(window), 10)
}

// appendPK appends ";pk=:<base64>:" for a param rule's quota.
func appendPK(b []byte, cq *callQuota) []byte {
	if !cq.hasPK {
		return b
	}
	b = append(b, ";pk=:"...)
	b = append(b, cq.pk[:]...)
	return append(b, ':')
}
