package proxy

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Premature resets (HTTP/2 "rapid reset", CVE-2023-44487, and the
// server-side resets a client provokes, "MadeYouReset", CVE-2025-8671). A
// client that opens streams and resets them at once makes the gateway
// route, check and forward each one (the upstream may go on serving what
// nobody reads) for the price of two frames; Go's server sends GOAWAY only
// once the handlers it queues pile up, and not at all for resets it makes
// itself. So, as Envoy's premature_reset_total_stream_count and
// premature_reset_min_stream_lifetime_seconds do, a connection is closed
// once it has had at least prematureMinStreams streams and more than half
// of them ended before their answer did, within prematureLifetime of their
// start. A browser that abandons some requests (a navigation away) comes
// nowhere near; a connection that only resets is closed at its 500th stream.
//
// A rule per connection costs an attacker one reconnect per 500 streams,
// and one that completes every other stream, or opens a new connection
// every 490, never meets it: measured on the binary, legitimate traffic
// stayed at 1-7 % of what it got alone. So the peer address is judged too
// (connCounts.premature): one whose streams end prematurely
// prematurePeerStreams times within the prematureWindow that ends now, over however many connections, or one of
// whose connections was closed for its resets or a flood, is refused new
// connections for penaltyFor, and each premature end on a connection it
// still holds closes that connection. Legitimate clients do not reset 500
// streams in 10 s; a peer that is one of trustedProxies (a load balancer
// that many clients share) is judged by connection only.

// streamCounts are one connection's streams (requests) and how many of
// them its client ended prematurely. Safe for concurrent use: a
// connection's streams end on their own goroutines.
type streamCounts struct {
	ended, premature atomic.Int64
}

const (
	prematureMinStreams  = 500
	prematureLifetime    = time.Second
	prematurePeerStreams = 500
	prematureWindow      = 10 * time.Second
	penaltyFor           = 10 * time.Second
)

// streamConn is the connection r came on, as the traffic listener
// accepted it (Gateway.Listener and Gateway.ConnContext); nil when it was
// served otherwise.
func streamConn(r *http.Request) *sendConn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	sc, _ := c.(*sendConn)
	return sc
}

// endStream counts the end of r, a stream of c that began at start (on
// g's clock), and closes c when its streams have ended prematurely too
// often.
func (g *Gateway) endStream(c *sendConn, r *http.Request, start int64) {
	n := c.streams.ended.Add(1)
	if r.Context().Err() == nil || g.clock.Now()-start >= int64(prematureLifetime) {
		return
	}
	p := c.streams.premature.Add(1)
	if n >= prematureMinStreams && 2*p > n || g.conns.premature(c.ip, time.Now(), c.trusted(g)) {
		g.cut(c, RefusedPrematureResets)
	}
}

// trusted reports whether c's peer is one of the trustedProxies in force,
// which many clients share: it is judged by connection only.
func (c *sendConn) trusted(g *Gateway) bool {
	s := g.cur.Load()
	return s != nil && s.sources.trustedAddr(c.ip)
}
