package proxy

import (
	"net/http"
	"strings"

	"sluice/limiter"
)

// isGRPC reports a gRPC call (content-type application/grpc, +proto,
// +json, -web, ...), which must be refused the way gRPC clients read it.
func isGRPC(r *http.Request) bool {
	ct := r.Header["Content-Type"]
	return len(ct) > 0 && len(ct[0]) >= 16 && strings.EqualFold(ct[0][:16], "application/grpc")
}

// gRPC's status codes for a blocked call: RESOURCE_EXHAUSTED, and
// PERMISSION_DENIED for a caller an authority rule refuses.
const (
	grpcResourceExhausted = "8"
	grpcPermissionDenied  = "7"
)

var (
	grpcStatus8 = []string{grpcResourceExhausted}
	grpcStatus7 = []string{grpcPermissionDenied}
)

// grpcMessages renders each reason's grpc-message for resource once:
// percent-encoded as the gRPC HTTP/2 mapping asks.
func grpcMessages(resource string) (out [numReasons][]string) {
	for i := range out {
		out[i] = []string{grpcPercentEncode("sluice: resource " + resource + " blocked (" + limiter.Reason(i).String() + ")")}
	}
	return out
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
