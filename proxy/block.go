package proxy

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"sluice/config"
	"sluice/limiter"
)

const numReasons = int(limiter.ReasonDryRun) + 1

// blockResponses are one route's block answer (its blockResponse: the
// top-level one with the route's own fields over it), made once per
// snapshot: the bodies rendered once per reason, so a block renders no
// template, and the header values shared by every response.
type blockResponses struct {
	status      int
	contentType []string
	body        [numReasons][]byte
	grpcMessage *grpcMessages
	// location is the Location of a redirect (nil: none): a blocked call
	// is answered 302 with it, no body and no RateLimit fields.
	location []string
	// headers: RateLimit fields on passes and blocks; legacy: the
	// X-RateLimit-* fields too.
	headers, legacy bool
}

// reasonHeader holds the X-Sluice-Blocked values, shared by every response.
var reasonHeader = func() (h [numReasons][]string) {
	for i := range h {
		h[i] = []string{limiter.Reason(i).String()}
	}
	return h
}()

// renderBlock renders a route's block bodies, one per reason, with body
// (blockResponse.body, parsed once per snapshot).
func renderBlock(b config.BlockResponse, body *config.BlockBody, resource string) (blockResponses, error) {
	out := blockResponses{status: b.Status, contentType: []string{b.ContentType}, grpcMessage: newGRPCMessages(resource),
		headers: b.Headers(), legacy: b.LegacyHeaders}
	if b.Redirect != "" {
		out.location = []string{b.Redirect}
	}
	for i := range out.body {
		rendered, err := body.Render(config.BlockData{Resource: resource, Reason: limiter.Reason(i).String()})
		if err != nil {
			return out, fmt.Errorf("proxy: blockResponse.body: %w", err)
		}
		out.body[i] = rendered
	}
	return out, nil
}

// reject writes the block response for v: the route's status and body, or
// its redirect, or for a gRPC call the answer gRPC clients read.
func (rt *route) reject(ex *exchange, origin string, v limiter.Verdict, start int64) {
	s := rt.snap
	h := ex.Header()
	h["X-Sluice-Blocked"] = reasonHeader[v.Reason]
	retry := v.RetryAfter
	// A group's rule that blocked is named in the body; the rest of the
	// answer is the route's.
	body, grpcMessage := &rt.blocked.body, rt.blocked.grpcMessage
	if e := ex.call.blockedBy; e != nil {
		body, grpcMessage = &e.blocked.body, e.blocked.grpcMessage
	}
	status := rt.blocked.status
	authority := v.Reason == limiter.ReasonAuthority
	if authority {
		// The caller may not call the resource at all: no wait, and no
		// page a redirect leads to, helps.
		status = http.StatusForbidden
	}
	grpc := isGRPC(ex.req)
	if rt.blocked.location != nil && !grpc && !authority {
		// Sentinel gateway's redirect: a 302 the client follows at once,
		// so no Retry-After and no RateLimit fields (a client may wait
		// for t before following a redirect: draft-10 section 6).
		status = http.StatusFound
		h["Location"] = rt.blocked.location
		ex.WriteHeader(status)
		rt.blockDone(ex, origin, v, start, status, retry)
		return
	}
	h["Content-Type"] = rt.blocked.contentType
	if v.HasQuota && rt.blocked.headers {
		// The quotas the call met, the blocking one last (RateLimit names
		// it, with t what Retry-After says: a rule without a quota, an
		// open breaker, may need longer than the quota named).
		retry = max(retry, v.Quota.Reset)
		ex.call.quotas.blockedFor(retry)
		ex.call.quotas.set(h, s.rateLimit, rt.blocked.legacy, true)
	}
	if retry > 0 {
		h["Retry-After"] = []string{strconv.FormatInt(ceilSeconds(retry), 10)}
	}
	if grpc {
		// A gRPC client reads the outcome from grpc-status, not the HTTP
		// status: 200 with headers only (a trailers-only response) and
		// RESOURCE_EXHAUSTED for every reason, an authority refusal
		// included (SPEC section 8); grpc-message names the reason.
		status = http.StatusOK
		h["Content-Type"] = ex.req.Header["Content-Type"] // the call's own flavour (+proto, -web)
		h["Grpc-Status"] = grpcStatus8
		h["Grpc-Message"] = grpcMessage.of(v.Reason)
		ex.WriteHeader(status)
	} else {
		ex.WriteHeader(status)
		_, _ = ex.Write(body[v.Reason])
	}
	rt.blockDone(ex, origin, v, start, status, retry)
}

// blockDone counts and logs a block answered status.
func (rt *route) blockDone(ex *exchange, origin string, v limiter.Verdict, start int64, status int, retry time.Duration) {
	s := rt.snap
	elapsed := time.Duration(s.clock.Now() - start)
	rt.obs.Block(v.Reason.String(), elapsed)
	ex.call.observeBlock(v.Reason.String(), elapsed)
	if e := s.log.Debug(); e.Enabled() {
		resource := rt.resource
		if g := ex.call.blockedBy; g != nil {
			resource = g.g.name
		}
		e.Str("resource", resource).Str("origin", origin).Str("reason", v.Reason.String()).
			Dur("retryAfter", retry).Msg("blocked")
	}
	if s.accessLog {
		s.log.Info().Str("resource", rt.resource).Str("origin", origin).Str("method", ex.req.Method).
			Str("path", ex.view.path).Int("status", status).Dur("latency", elapsed).
			Str("decision", "block").Str("reason", v.Reason.String()).Msg("access")
	}
}

// setRateLimit writes the draft-ietf-httpapi-ratelimit-headers-10 fields:
// RateLimit-Policy: "<name>";q=<quota>;w=<window s> and
// RateLimit: "<name>";r=<remaining>;t=<s until quota frees>.
// Both values share one string and one []string backing: two allocations
// per response instead of four.
func setRateLimit(h http.Header, q *limiter.Quota) {
	var buf [256]byte
	limit, window := wholeQuota(q.Limit, q.Window)
	b := appendSfString(buf[:0], q.Policy)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, limit, 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, ceilSeconds(window), 10)
	split := len(b)
	b = appendSfString(b, q.Policy)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, int64(max(q.Remaining, 0)), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, ceilSeconds(q.Reset), 10)
	s := string(b)
	v := make([]string, 2)
	v[0], v[1] = s[:split], s[split:]
	h["Ratelimit-Policy"] = v[0:1:1]
	h["Ratelimit"] = v[1:2:2]
}

// wholeQuota states the quota as whole calls over whole seconds, both
// integers in the draft: 0.5 per 1 s is 1 per 2 s, 100 per 500 ms is 200 per
// 1 s, 3 per 1500 ms is 6 per 3 s (q=0 would tell clients that nothing may
// ever pass). It looks for the smallest multiple up to 1000 that makes
// both whole; past that the count is rounded.
func wholeQuota(limit float64, window time.Duration) (int64, time.Duration) {
	if limit <= 0 {
		return 0, window
	}
	// Only multiples of step make the window whole seconds.
	step := int(time.Second / gcd(window, time.Second))
	for k := step; k <= 1000; k += step {
		w := window * time.Duration(k)
		x := limit * float64(k)
		if r := math.Round(x); r >= 1 && math.Abs(x-r) <= 1e-9*x {
			return int64(r), w
		}
	}
	return max(int64(math.Round(limit*1000)), 1), window * 1000
}

func gcd(a, b time.Duration) time.Duration {
	for b != 0 {
		a, b = b, a%b
	}
	return max(a, 1)
}

// appendSfString appends s as a structured-field string (RFC 9651 3.3.3):
// printable ASCII only, with '"' and '\' escaped. Other bytes (a Sentinel
// resource is often named in Chinese) and '%' itself are percent-encoded,
// so the field stays valid and the name can still be read back.
func appendSfString(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e || c == '%':
			b = append(b, '%', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// ceilSeconds rounds d up to whole seconds (Retry-After may never promise
// less than the limiter knows).
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}
