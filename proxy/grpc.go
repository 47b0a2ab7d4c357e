package proxy

import (
	"net/http"
	"strings"

	"sluice/config"
	"sluice/limiter"
)

// isGRPC reports a gRPC call (content-type application/grpc, +proto,
// +json, -web, ...), which must be refused the way gRPC clients read it.
func isGRPC(r *http.Request) bool {
	ct := r.Header["Content-Type"]
	return len(ct) > 0 && len(ct[0]) >= 16 && strings.EqualFold(ct[0][:16], "application/grpc")
}

// grpcResourceExhausted is gRPC's RESOURCE_EXHAUSTED status code.
const grpcResourceExhausted = "8"

var (
	grpcStatus8 = []string{grpcResourceExhausted}
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

// transportFor is the upstream transport for protocol: the gateway's
// HTTP/1.1 one, or one speaking HTTP/2 (h2c with prior knowledge, or h2
// over TLS), kept for the gateway's lifetime so connections outlive
// snapshots. A test's Deps.Transport serves every protocol.
func (g *Gateway) transportFor(protocol string) http.RoundTripper {
	if g.deps.Transport != nil {
		return g.deps.Transport
	}
	switch protocol {
	case config.ProtocolH2C:
		return g.h2c
	case config.ProtocolH2:
		return g.h2
	}
	return g.transport
}

// newH2Transport is newTransport speaking only HTTP/2: with prior
// knowledge over plain TCP (h2c), or over TLS (h2).
func newH2Transport(h2c bool) *http.Transport {
	t := newTransport()
	var p http.Protocols
	if h2c {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP2(true)
	}
	t.Protocols = &p
	t.ForceAttemptHTTP2 = true
	return t
}
