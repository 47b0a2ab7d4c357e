package proxy

import (
	"net/http"
	"strings"
	"sync/atomic"

	"sluice/limiter"
)

// isGRPC reports a gRPC call (content-type application/grpc, +proto,
// +json, -web, ...), which must be refused the way gRPC clients read it.
func isGRPC(r *http.Request) bool { return grpcContent(r.Header) }

// grpcContent reports a gRPC content-type in h, a call's or an answer's.
func grpcContent(h http.Header) bool {
	ct := h["Content-Type"]
	return len(ct) > 0 && len(ct[0]) >= 16 && strings.EqualFold(ct[0][:16], "application/grpc")
}

// grpcStream reports a call that can stream its messages: gRPC over
// HTTP/2. gRPC-Web (application/grpc-web, over HTTP/1.1 too) sends a
// request's messages at once: its clients have no client streaming.
func grpcStream(r *http.Request) bool {
	if r.ProtoMajor != 2 || !isGRPC(r) {
		return false
	}
	ct := r.Header["Content-Type"][0]
	return len(ct) < 20 || !strings.EqualFold(ct[16:20], "-web")
}

// grpcStatus8 is a blocked call's gRPC status, RESOURCE_EXHAUSTED, for every
// reason an authority refusal included: SPEC section 8 gives one status to
// every block, and grpc-message names the reason.
var grpcStatus8 = []string{"8"}

// grpcMessages are a resource's grpc-message values, one per reason,
// percent-encoded as the gRPC HTTP/2 mapping asks. They are rendered at the
// first gRPC call the resource blocks: most resources never see one, and
// rendered with each route they took 5.5 MB of a gateway of 10,000 routes.
type grpcMessages struct {
	resource string
	msgs     atomic.Pointer[[numReasons][]string]
}

func newGRPCMessages(resource string) *grpcMessages { return &grpcMessages{resource: resource} }

// of is the grpc-message of a block for reason.
func (g *grpcMessages) of(reason limiter.Reason) []string {
	m := g.msgs.Load()
	if m == nil {
		m = new([numReasons][]string)
		for i := range m {
			m[i] = []string{grpcPercentEncode("sluice: resource " + g.resource + " blocked (" + limiter.Reason(i).String() + ")")}
		}
		if !g.msgs.CompareAndSwap(nil, m) {
			m = g.msgs.Load()
		}
	}
	return m[reason]
}

func grpcPercentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}
